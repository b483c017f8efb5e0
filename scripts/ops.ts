import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { connect, type Sql } from '../queue/db.ts';
import {
  bulkCancel, bulkRequeue, cancelJob, ConflictError, deadLetters, failJobPermanently, getJob, isJobId, jobFamily, type BulkFilter, type JobStatus,
  type Json, type JsonObject, NotFoundError, queueDepth, readLeaderLease, releaseJobLease, releaseLeaderLease, replayJob, requeueJob,
  rescueExpiredLeases, runningJobs, sendEvent, signalJob, ValidationError,
} from '../queue/index.ts';
import { formatAge, helpHint, printTable, resolveDatabaseUrl, wrap } from './lib/cli.ts';
import { FLOW_COMMANDS, printFlowControl } from './lib/ops-flow.ts';

// `npm run ops -- <command>`: the operator's quick checks and manual operations over
// DATABASE_URL (or the running `npm start` stack's database). `npm run inspect` is `ops inspect`.

const STUCK_MS = 2 * 3_600_000;

interface Options {
  reason?: string;
  /** Who pauses (pause-type, pause-pool) or resumes a rate key (resume-rate-key). */
  by?: string;
  force: boolean;
  olderThanMs: number;
  /** The command's other arguments, as its `args` names them. */
  args: string[];
  key?: string;
  payload?: Json;
  /** the bulk commands' filter (--type, --status, --created-after, …, --fingerprint, --all) */
  filter: BulkFilter;
  dryRun: boolean;
  fromStep?: string;
}

interface Command {
  usage: string;
  help: string;
  /** Changes data in a way that cannot be undone: refused on a non-local database without --force. */
  destructive?: boolean;
  /** Takes a job id. */
  needsId?: boolean;
  /** Takes a name: what it names (a job type, a pool). */
  needsName?: string;
  /** The arguments it takes (after the id), by name. */
  args?: string[];
  run(sql: Sql, id: string, options: Options): Promise<void>;
}

// Each view reads before it prints its title: a database that cannot be reached is one line.
const views = {
  async depth(sql: Sql) {
    const depth = await queueDepth(sql);
    console.log('queue depth');
    printTable(depth.map((d) => ({ status: d.status, type: d.type, jobs: d.count })));
  },
  async lease(sql: Sql) {
    const lease = await readLeaderLease(sql);
    console.log('leader lease');
    printTable([{ holder: lease.holder, generation: lease.generation, acquired: lease.acquiredAt, expires: lease.expiresAt,
      expired: lease.expiresAt ? lease.expiresAt.getTime() < Date.now() : null }]);
  },
  async running(sql: Sql) {
    const running = await runningJobs(sql);
    console.log('running');
    printTable(running.map((r) => ({ id: r.id, type: r.type, step: r.step, owner: r.owner, age: formatAge(r.runningForMs), lease_until: r.lockedUntil })));
  },
  async stuck(sql: Sql, olderThanMs: number) {
    const stuck = await runningJobs(sql, { olderThanMs });
    console.log(`stuck (running > ${formatAge(olderThanMs)})`);
    printTable(stuck.map((r) => ({ id: r.id, type: r.type, step: r.step, owner: r.owner, age: formatAge(r.runningForMs) })));
  },
};

export const COMMANDS: Record<string, Command> = {
  inspect: {
    usage: 'inspect',
    help: 'depth, lease, running, stuck, pauses and rate limits together (what `npm run inspect` prints)',
    async run(sql, _id, o) {
      await views.depth(sql);
      console.log();
      await views.lease(sql);
      console.log();
      await views.running(sql);
      console.log();
      await views.stuck(sql, o.olderThanMs);
      console.log();
      await printFlowControl(sql);
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
  signal: {
    usage: "signal <id> <name> [--key K] [--payload JSON]",
    help: "send the event <name> to a job: its wait on it resumes now, or its next wait on it takes it",
    needsId: true,
    args: ['name'],
    async run(sql, id, o) {
      const answer = await signalJob(sql, id, o.args[0]!, { key: o.key, payload: o.payload });
      console.log(answer.delivered.length > 0 ? `signalled ${id}: it resumes at its next claim` : `kept event ${answer.keptEventId} for ${id}: its next wait on ${o.args[0]} takes it`);
    },
  },
  event: {
    usage: 'event <name> [--key K] [--payload JSON]',
    help: 'send the event to every job waiting on (name, key); kept for the next wait on it when none is',
    args: ['name'],
    async run(sql, _id, o) {
      const answer = await sendEvent(sql, o.args[0]!, { key: o.key, payload: o.payload });
      console.log(answer.delivered.length > 0 ? `delivered to ${answer.delivered.length} job(s): ${answer.delivered.join(', ')}` : `no job waits on it: kept as event ${answer.keptEventId} for the next wait`);
    },
  },
  'dead-letters': {
    usage: 'dead-letters [--type T]',
    help: 'failed and oom_killed jobs grouped by type and error fingerprint, latest first',
    async run(sql, _id, o) {
      console.log('dead letters');
      printTable((await deadLetters(sql, { type: o.filter.type })).map((g) => ({
        type: g.type, fingerprint: g.fingerprint, jobs: g.jobs, oom_killed: g.oomKilled, last_seen: g.lastSeen, sample: g.sampleId, error: g.error,
      })));
    },
  },
  'bulk-retry': {
    usage: 'bulk-retry --type T --status S --fingerprint F [--created-after/--created-before/--finished-after/--finished-before ISO] [--all] [--dry-run]',
    help: 'requeue every failed, cancelled or oom_killed job the filter takes, in batches (--dry-run: count them)',
    async run(sql, _id, o) {
      const r = await bulkRequeue(sql, o.filter, { dryRun: o.dryRun });
      console.log(r.dryRun ? `dry run: ${r.matched} job(s) would be requeued` : `requeued ${r.requeued} of ${r.matched} job(s) in ${r.batches} batch(es); skipped ${r.skipped}`);
    },
  },
  'bulk-cancel': {
    usage: 'bulk-cancel --type T [--status S] [--created-after/--created-before ISO] [--all] [--reason "why"] [--dry-run]',
    help: 'cancel every queued or running job the filter takes, in batches (--dry-run: count them)',
    destructive: true,
    async run(sql, _id, o) {
      const r = await bulkCancel(sql, o.filter, { dryRun: o.dryRun, reason: o.reason ?? 'cancelled in bulk with npm run ops' });
      console.log(r.dryRun ? `dry run: ${r.matched} job(s) would be cancelled`
        : `cancelled ${r.cancelled}, cancel requested for ${r.cancelRequested} (hooks run at their next step), of ${r.matched} job(s); skipped ${r.skipped}`);
    },
  },
  replay: {
    usage: "replay <id> [--from-step S] [--payload JSON]",
    help: 'run an ended job again as a new job linked to it (from a step it reached, with an edited payload)',
    needsId: true,
    async run(sql, id, o) {
      const job = await replayJob(sql, id, { fromStep: o.fromStep, payload: o.payload as JsonObject | undefined });
      console.log(`replayed ${id} as ${job.id} (${job.type}, from step ${job.step}); it runs at the next claim`);
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
  ...FLOW_COMMANDS,
};

/** The help: each command's usage, and below it what it does, within HELP_WIDTH columns. */
export function usage(): string {
  return [
    'usage: npm run ops -- <command> [args]',
    ...wrap('Over DATABASE_URL, or the running `npm start` stack\'s database. Exit 0: done; 1: refused by the job\'s state; 2: a usage error.', ''),
    '',
    'commands:',
    ...Object.values(COMMANDS).flatMap((c) => [...wrap(c.usage, '      ', { first: '  ' }), ...wrap(c.help, '      ')]),
    '',
    ...wrap('fail, cancel and bulk-cancel refuse a database that is not local unless given --force.', ''),
  ].join('\n');
}

const OPS = 'npm run ops';

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
class UnknownCommand extends UsageError {}

/** Runs one command; returns the exit code (0 done, 1 the operation was refused, 2 a usage error). */
export async function main(argv: string[]): Promise<number> {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (error) {
    // the error and where the help is, not the whole help: that pushed the error off the screen
    console.error(`error: ${(error as Error).message}`);
    if (error instanceof UnknownCommand) console.error(wrap(Object.keys(COMMANDS).join(', '), '  ', { first: 'the commands: ' }).join('\n'));
    console.error(helpHint(OPS));
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
      by: { type: 'string' },
      force: { type: 'boolean', default: false },
      'older-than': { type: 'string' },
      key: { type: 'string' },
      type: { type: 'string' },
      status: { type: 'string', multiple: true },
      'created-after': { type: 'string' },
      'created-before': { type: 'string' },
      'finished-after': { type: 'string' },
      'finished-before': { type: 'string' },
      fingerprint: { type: 'string' },
      all: { type: 'boolean', default: false },
      'dry-run': { type: 'boolean', default: false },
      'from-step': { type: 'string' },
      payload: { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  const [command, ...rest] = positionals;
  if (values.help || command === 'help') return { command: 'help', id: '', options: { force: false, olderThanMs: STUCK_MS, args: [], filter: {}, dryRun: false } };
  if (!command) throw new UsageError('no command given');
  const spec = COMMANDS[command];
  if (!spec) throw new UnknownCommand(`unknown command "${command}"`);
  const id = spec.needsId || spec.needsName ? rest.shift() : undefined;
  const args = rest.splice(0, spec.args?.length ?? 0);
  const extra = rest;
  if (spec.needsId && !id) throw new UsageError(`${command} needs a job id: npm run ops -- ${spec.usage}`);
  if (spec.needsId && !isJobId(id!)) {
    throw new UsageError(`"${id}" is not a job id (a UUID, as the dashboard and \`npm run ops -- running\` show)`);
  }
  if (spec.needsName && !id) throw new UsageError(`${command} needs a ${spec.needsName}: npm run ops -- ${spec.usage}`);
  if (spec.needsName && command.startsWith('pause-') && !values.reason?.trim()) {
    throw new UsageError(`${command} needs a reason: npm run ops -- ${spec.usage}`);
  }
  if (args.length < (spec.args?.length ?? 0)) throw new UsageError(`${command} needs ${spec.args!.join(', ')}: npm run ops -- ${spec.usage}`);
  if (!spec.needsId && !spec.needsName && !spec.args && extra.length === 1) throw new UsageError(`${command} takes no argument, got "${extra[0]}"`);
  if (extra.length) throw new UsageError(`unexpected argument(s): ${extra.join(' ')}`);
  if (command === 'fail' && !values.reason?.trim()) throw new UsageError('fail needs a reason: npm run ops -- fail <id> --reason "why"');
  let olderThanMs = STUCK_MS;
  if (values['older-than'] !== undefined) {
    olderThanMs = Number(values['older-than']);
    if (!Number.isInteger(olderThanMs) || olderThanMs < 0) throw new UsageError(`--older-than must be a number of milliseconds, got ${values['older-than']}`);
  }
  let payload: Json | undefined;
  if (values.payload !== undefined) {
    try {
      payload = JSON.parse(values.payload) as Json;
    } catch {
      throw new UsageError(`--payload must be JSON, got ${values.payload}`);
    }
    // a replay's payload is a job's payload: an object (a signal's may be any JSON)
    if (command === 'replay' && (payload === null || typeof payload !== 'object' || Array.isArray(payload))) {
      throw new UsageError(`--payload must be a JSON object, got ${values.payload}`);
    }
  }
  // the filter is checked by the SQL function, which names a bad field (filter.status, …)
  const filter: BulkFilter = {
    type: values.type, status: values.status as JobStatus[] | undefined, createdAfter: values['created-after'], createdBefore: values['created-before'],
    finishedAfter: values['finished-after'], finishedBefore: values['finished-before'], fingerprint: values.fingerprint, ...(values.all ? { all: true } : {}),
  };
  return {
    command, id: id ?? '',
    options: {
      reason: values.reason, by: values.by, force: values.force, olderThanMs, args, key: values.key, payload,
      filter, dryRun: values['dry-run'], fromStep: values['from-step'],
    },
  };
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  process.exitCode = await main(process.argv.slice(2));
}
