import { hostname } from 'node:os';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { connect } from '../queue/db.ts';
import { JobRegistry, LogAlerts, runSteps, sampleJobTypes, type JobType } from '../queue/index.ts';
import { fail, resolveDatabaseUrl } from './lib/cli.ts';
import { watchForStop } from './lib/lifecycle.ts';

// `npm run worker [-- --drain] [--pool P] [--concurrency N] [--grace-ms MS] [--types ./my-types.ts]`
// The engine's runner in Node against DATABASE_URL, until SIGTERM/SIGINT/SIGHUP or until its
// parent process goes away (lib/lifecycle.ts): claiming stops at once, the in-flight steps get
// --grace-ms to finish, then are aborted and their leases released for immediate reclaim; exit 0.
// The npm script execs node itself (no shell or tsx process in between), so npm's forwarded
// SIGTERM reaches this process and npm exits with its status. --drain exits when nothing is due. --types loads a module whose
// default export is an array of extra job types (self-hosted handlers).
const { values } = parseArgs({
  options: {
    drain: { type: 'boolean', default: false },
    pool: { type: 'string' },
    concurrency: { type: 'string', default: '5' },
    'grace-ms': { type: 'string', default: '10000' },
    'poll-ms': { type: 'string', default: '200' },
    types: { type: 'string' },
  },
});
const concurrency = Number(values.concurrency);
if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 100) fail('--concurrency must be an integer from 1 to 100');

const types: JobType<any>[] = [...sampleJobTypes];
if (values.types) {
  const mod = (await import(pathToFileURL(resolve(values.types)).href)) as { default?: JobType<any>[] };
  if (!Array.isArray(mod.default)) fail(`${values.types} must default-export an array of job types`);
  types.push(...mod.default);
}
const workerId = `${hostname()}:${process.pid}`;
// From here on a stop signal is graceful (before, there is nothing to finish); a stop that comes
// before the runner starts makes it return at once.
const stop = watchForStop({
  onStop: (reason) => console.log(JSON.stringify({ level: 'info', msg: `${reason}: finishing in-flight steps`, workerId })),
});
const registry = new JobRegistry(types);
const sql = connect(resolveDatabaseUrl(), { max: concurrency + 2, applicationName: `starbase-worker ${workerId}` });
await registry.sync(sql);

console.log(JSON.stringify({ level: 'info', msg: 'worker started', workerId, pool: values.pool ?? null, concurrency, drain: values.drain }));
let failure: unknown = null;
const counts = await runSteps(
  {
    sql,
    registry,
    workerId,
    pool: values.pool ?? null,
    concurrency,
    alerts: new LogAlerts(),
    log: (line) => console.log(JSON.stringify(line)),
  },
  {
    signal: stop.signal,
    graceMs: Number(values['grace-ms']),
    ...(values.drain ? {} : { idleWaitMs: Number(values['poll-ms']) }),
  },
).catch((error: unknown) => {
  // The database failed a claim; the steps in flight have settled (or given up) by now. Exit
  // non-zero so a supervisor restarts the worker with fresh connections.
  failure = error;
  return null;
});
stop.dispose();
if (counts) console.log(JSON.stringify({ level: 'info', msg: 'worker stopped', workerId, ...counts }));
else {
  const e = failure as { code?: string; message?: string } | null;
  console.error(JSON.stringify({ level: 'error', msg: 'worker stopped: the database failed', workerId, code: e?.code, error: e?.message ?? String(failure) }));
}
await sql.end({ timeout: 5 });
process.exit(counts ? 0 : 1);
