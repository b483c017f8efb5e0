import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { connect, type Sql } from '../queue/db.ts';
import {
  cancelJob, ConflictError, failJobPermanently, getJob, isJobId, jobFamily, NotFoundError, queueDepth, readLeaderLease, releaseJobLease, releaseLeaderLease,
  requeueJob, rescueExpiredLeases, runningJobs, ValidationError,
} from '../queue/index.ts';
import { formatAge, printTable, resolveDatabaseUrl } from './lib/cli.ts';

// `npm run ops -- <command>`: the operator's quick checks and manual operations over
// DATABASE_URL (or the running `npm start` stack's database). `npm run inspect` is `ops inspect`.

const STUCK_MS = 2 * 3_600_000;

interface Options {
  reason?: string;
  force: boolean;
  olderThanMs: number;
}

interface Command {
  usage: string;
  help: string;
  /** Changes data in a way that cannot be undone: refused on a non-local database without --force. */
  destructive?: boolean;
  /** Takes a job id. */
  needsId?: boolean;
  run(sql: Sql, id: string, options: Options): Promise<void>;
}

const views = {
  async depth(sql: Sql) {
    console.log('queue depth');
    printTable((await queueDepth(sql)).map((d) => ({ status: d.status, type: d.type, jobs: d.count })));
  },
  async lease(sql: Sql) {
    const lease = await readLeaderLease(sql);
    console.log('leader lease');
    printTable([{ holder: lease.holder, generation: lease.generation, acquired: lease.acquiredAt, expires: lease.expiresAt,
      expired: lease.expiresAt ? lease.expiresAt.getTime() < Date.now() : null }]);
  },
  async running(sql: Sql) {
    console.log('running');
    printTable((await runningJobs(sql)).map((r) => ({ id: r.id, type: r.type, step: r.step, owner: r.owner, age: formatAge(r.runningForMs), lease_until: r.lockedUntil })));
  },
  async stuck(sql: Sql, olderThanMs: number) {
    console.log(`stuck (running > ${formatAge(olderThanMs)})`);
    printTable((await runningJobs(sql, { olderThanMs })).map((r) => ({ id: r.id, type: r.type, step: r.step, owner: r.owner, age: formatAge(r.runningForMs) })));
  },
};

export const COMMANDS: Record<string, Command> = {
  inspect: {
    usage: 'inspect',
    help: 'depth, lease, running and stuck together (what `npm run inspect` prints)',
    async run(sql, _id, o) {
      await views.depth(sql);
      console.log();
      await views.lease(sql);
      console.log();
      await views.running(sql);
      console.log();
      await views.stuck(sql, o.olderThanMs);
    },
  },
  depth: { usage: 'depth', help: 'jobs by status and type', run: (sql) => views.depth(sql) },
  lease: { usage: 'lease', help: 'the leader lease: holder, generation, expiry', run: (sql) => views.lease(sql) },
  running: { usage: 'running', help: 'running jobs with owner and age', run: (sql) => views.running(sql) },
  stuck: { usage: 'stuck [--older-than MS]', help: 'jobs whose step has run longer than 2 h (or MS)', run: (sql, _id, o) => views.stuck(sql, o.olderThanMs) },
  requeue: {
    usage: 'requeue <id>',
    help: 'run a failed, cancelled or oom_killed job again from its checkpoint (resolves its poison alert)',
    needsId: true,
    async run(sql, id) {
      const before = (await getJob(sql, id))?.job.status;
      const job = await requeueJob(sql, id);
      console.log(`requeued ${job.id} (was ${before}); it runs at the next claim`);
    },
  },
  fail: {
    usage: 'fail <id> --reason "why"',
    help: 'end a queued or running job as failed',
    needsId: true,
    destructive: true,
    async run(sql, id, o) {
      const job = await failJobPermanently(sql, id, o.reason ?? '');
      console.log(`failed ${job.id}: ${job.lastError}`);
    },
  },
  cancel: {
    usage: 'cancel <id> [--reason "why"]',
    help: "cancel a job (a started one runs its cancel hook at its next step)",
    needsId: true,
    destructive: true,
    async run(sql, id, o) {
      const job = await cancelJob(sql, id, o.reason ?? 'cancelled with npm run ops');
      console.log(job.status === 'cancelled' ? `cancelled ${job.id}` : `cancel requested for ${job.id} (${job.status}): its cancel hook runs at its next step`);
    },
  },
  'release-lease': {
    usage: 'release-lease <id>',
    help: "take a running job's lease from its owner and make it claimable now",
    needsId: true,
    async run(sql, id) {
      const before = (await getJob(sql, id))?.job.lockedBy;
      const job = await releaseJobLease(sql, id);
      console.log(`released the lease of ${job.id} (owner ${before ?? '?'}); it is queued again`);
    },
  },
  'leader-release': {
    usage: 'leader-release',
    help: 'expire the leader lease: the next tick of any deployment re-elects',
    async run(sql) {
      const { previousHolder } = await releaseLeaderLease(sql);
      console.log(`expired the leader lease (holder ${previousHolder ?? 'none'}); the next tick re-elects`);
    },
  },
  children: {
    usage: 'children <id>',
    help: "a job's parent and its latest spawn: the join, and each child's status and last error",
    needsId: true,
    async run(sql, id) {
      if (!(await getJob(sql, id))) throw new NotFoundError(`no job ${id}`);
      const family = await jobFamily(sql, id, { limit: 1000 });
      console.log(`parent: ${family.parentId ?? 'none'}`);
      const w = family.children;
      if (!w) {
        console.log('no children: the job never spawned');
        return;
      }
      const join = w.join === 'count' ? `${w.need} of ${w.total}` : w.join;
      console.log(`spawn ${w.waitNo}: join ${join}, ${w.ended} of ${w.total} ended (${w.created} created, ${w.total - w.created} adopted), ` +
        `${w.joinedAt ? `joined at ${w.joinedAt.toISOString()}` : 'waiting'}, resumes at ${w.nextStep}`);
      printTable(w.children.map((c) => ({ id: c.id, type: c.type, status: c.status, last_error: c.lastError })));
      if (w.children.length < w.total) console.log(`(the first ${w.children.length} of ${w.total})`);
    },
  },
  rescue: {
    usage: 'rescue',
    help: 'run the rescue sweep now: expired leases requeued one weight class up, or ended',
    async run(sql) {
      const counts = await rescueExpiredLeases(sql);
      console.log(`rescue: requeued ${counts.requeued}, failed ${counts.failed}, oom_killed ${counts.oomKilled}`);
    },
  },
};

export function usage(): string {
  const width = Math.max(...Object.values(COMMANDS).map((c) => c.usage.length));
  return [
    'usage: npm run ops -- <command> [args]   (over DATABASE_URL, or the running `npm start` stack)',
    '',
    ...Object.values(COMMANDS).map((c) => `  ${c.usage.padEnd(width)}  ${c.help}`),
    '',
    'fail and cancel refuse a database that is not local unless given --force.',
  ].join('\n');
}

/** 127.0.0.1, localhost, ::1 or a unix socket: a database on this machine. */
export function isLocalDatabase(url: string): boolean {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return false;
  }
  const host = decodeURIComponent(u.hostname).toLowerCase();
  const socket = u.searchParams.get('host');
  if (host === '') return socket === null ? !process.env.PGHOST || process.env.PGHOST.startsWith('/') : socket.startsWith('/');
  return host.startsWith('/') || ['localhost', '127.0.0.1', '::1', '[::1]'].includes(host);
}

function hostOf(url: string): string {
  try {
    return new URL(url).hostname || '(default host)';
  } catch {
    return '(unparsable URL)';
  }
}

class UsageError extends Error {}

/** Runs one command; returns the exit code (0 done, 1 the operation was refused, 2 a usage error). */
export async function main(argv: string[]): Promise<number> {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (error) {
    console.error(`error: ${(error as Error).message}\n\n${usage()}`);
    return 2;
  }
  const { command, id, options } = parsed;
  if (command === 'help') {
    console.log(usage());
    return 0;
  }
  const url = resolveDatabaseUrl();
  if (COMMANDS[command]!.destructive && !options.force && !isLocalDatabase(url)) {
    console.error(`error: refusing to ${command} a job on ${hostOf(url)}: it is not a local database (127.0.0.1, localhost, ::1 or a unix socket). Add --force if you mean it.`);
    return 2;
  }
  const sql = connect(url, { max: 1, applicationName: `starbase-worker ops ${command}` });
  try {
    await COMMANDS[command]!.run(sql, id, options);
    return 0;
  } catch (error) {
    if (error instanceof NotFoundError || error instanceof ConflictError || error instanceof ValidationError) {
      console.error(`error: ${error.message}`);
      return 1;
    }
    throw error;
  } finally {
    await sql.end();
  }
}

function parse(argv: string[]): { command: string; id: string; options: Options } {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      reason: { type: 'string' },
      force: { type: 'boolean', default: false },
      'older-than': { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  const [command, id, ...extra] = positionals;
  if (values.help || command === 'help') return { command: 'help', id: '', options: { force: false, olderThanMs: STUCK_MS } };
  if (!command) throw new UsageError('no command given');
  const spec = COMMANDS[command];
  if (!spec) throw new UsageError(`unknown command "${command}"`);
  if (spec.needsId && !id) throw new UsageError(`${command} needs a job id: npm run ops -- ${spec.usage}`);
  if (spec.needsId && !isJobId(id!)) {
    throw new UsageError(`"${id}" is not a job id (a UUID, as the dashboard and \`npm run ops -- running\` show)`);
  }
  if (!spec.needsId && id !== undefined) throw new UsageError(`${command} takes no argument, got "${id}"`);
  if (extra.length) throw new UsageError(`unexpected argument(s): ${extra.join(' ')}`);
  if (command === 'fail' && !values.reason?.trim()) throw new UsageError('fail needs a reason: npm run ops -- fail <id> --reason "why"');
  let olderThanMs = STUCK_MS;
  if (values['older-than'] !== undefined) {
    olderThanMs = Number(values['older-than']);
    if (!Number.isInteger(olderThanMs) || olderThanMs < 0) throw new UsageError(`--older-than must be a number of milliseconds, got ${values['older-than']}`);
  }
  return { command, id: id ?? '', options: { reason: values.reason, force: values.force, olderThanMs } };
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  process.exitCode = await main(process.argv.slice(2));
}
