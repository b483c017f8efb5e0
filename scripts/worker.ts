import { hostname } from 'node:os';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { connect } from '../queue/db.ts';
import { JobRegistry, LogAlerts, runSteps, sampleJobTypes, type JobType } from '../queue/index.ts';
import { fail, resolveDatabaseUrl, usageError } from './lib/cli.ts';
import { connectionLimitError } from './lib/connection-limit.ts';
import { stdoutLines } from './lib/line-writer.ts';
import { watchForStop } from './lib/lifecycle.ts';
import { loopConcurrencies, parseWorkerOptions, WORKER_USAGE, WorkerUsageError, type WorkerOptions } from './lib/worker-options.ts';

// `npm run worker [-- --drain] [--pool P] [--concurrency N] [--connections N] [--loops N] [--grace-ms MS] [--types ./my-types.ts]`
// (every option: lib/worker-options.ts). The engine's runner in Node against DATABASE_URL, until
// SIGTERM/SIGINT/SIGHUP or until its parent process goes away (lib/lifecycle.ts): claiming stops
// at once, the in-flight steps get --grace-ms to finish, then are aborted and their leases
// released for immediate reclaim; exit 0. The npm script execs node itself (no shell or tsx
// process in between), so npm's forwarded SIGTERM reaches this process and npm exits with its
// status. --drain exits when nothing is due. --types loads a module whose default export is an
// array of extra job types (self-hosted handlers).
if (process.argv.includes('--help') || process.argv.includes('-h')) {
  console.log(WORKER_USAGE);
  process.exit(0);
}
let options: WorkerOptions;
try {
  options = parseWorkerOptions(process.argv.slice(2));
} catch (error) {
  if (!(error instanceof WorkerUsageError)) throw error;
  usageError('npm run worker', error.message);
}
const { concurrency, connections, loops } = options;

const types: JobType<any>[] = [...sampleJobTypes];
if (options.types) {
  const mod = (await import(pathToFileURL(resolve(options.types)).href)) as { default?: JobType<any>[] };
  if (!Array.isArray(mod.default)) fail(`${options.types} must default-export an array of job types`);
  types.push(...mod.default);
}
const workerId = `${hostname()}:${process.pid}`;
const out = stdoutLines();
const log = (text: string) => out.line(text);
const sql = connect(resolveDatabaseUrl(), { max: connections, applicationName: `starbase-worker ${workerId}` });
// Before anything is written: a pool the server could never fill is a setting to fix, not a
// worker that stalls later waiting for connections.
const tooMany = await connectionLimitError(sql, connections);
if (tooMany) {
  await sql.end({ timeout: 5 });
  fail(tooMany);
}
// From here on a stop signal is graceful (before, there is nothing to finish); a stop that comes
// before the runner starts makes it return at once.
const stop = watchForStop({
  onStop: (reason) => log(JSON.stringify({ level: 'info', msg: `${reason}: finishing in-flight steps`, workerId })),
});
const registry = new JobRegistry(types);
await registry.sync(sql);

log(
  JSON.stringify({ level: 'info', msg: 'worker started', workerId, pool: options.pool, concurrency, connections, loops, drain: options.drain }),
);
// A claim that meets contention (deadlock, serialization failure, lock timeout) or a dropped
// connection is retried by the loop itself, one warn line per retry. A loop whose claim fails for
// good (any other error, a claim left unanswered, or the database unreachable for a minute) stops
// the others too (they finish their steps): the process exits non-zero and a supervisor restarts
// it with fresh connections.
const halt = new AbortController();
const signal = AbortSignal.any([stop.signal, halt.signal]);
let failure: unknown = null;
const results = await Promise.all(
  loopConcurrencies(concurrency, loops).map((perLoop) =>
    runSteps(
      {
        sql, registry, workerId, pool: options.pool, concurrency: perLoop, alerts: new LogAlerts(),
        log: (line) => log(JSON.stringify(line)), warn: (line) => log(JSON.stringify(line)),
      },
      { signal, graceMs: options.graceMs, ...(options.drain ? {} : { idleWaitMs: options.pollMs }) },
    ).catch((error: unknown) => {
      // The database failed a claim for good; this loop's steps in flight have settled (or given up) by now.
      failure ??= error;
      halt.abort();
      return null;
    }),
  ),
);
stop.dispose();
if (failure === null) {
  const counts = results.reduce<Record<string, number>>((sum, c) => {
    for (const [k, v] of Object.entries(c!)) sum[k] = (sum[k] ?? 0) + v;
    return sum;
  }, {});
  log(JSON.stringify({ level: 'info', msg: 'worker stopped', workerId, ...counts }));
} else {
  const e = failure as { code?: string; message?: string };
  console.error(JSON.stringify({ level: 'error', msg: 'worker stopped: the database failed', workerId, code: e?.code, error: e?.message ?? String(failure) }));
}
await sql.end({ timeout: 5 });
process.exit(failure === null ? 0 : 1);
