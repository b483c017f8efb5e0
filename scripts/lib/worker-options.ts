import { parseArgs } from 'node:util';

/**
 * `npm run worker`'s options, checked before anything connects: a bad value is refused with a
 * message naming it, and the worker writes nothing.
 *
 * Steps in flight (--concurrency) and database connections (--connections) are separate: the
 * runner claims a batch of jobs per round trip and completes finished steps in batches, so a
 * few connections keep hundreds of steps busy. More than one claim loop (--loops) lets one loop's
 * claim round trip overlap the other's steps; each loop holds its share of the steps in flight.
 */
export interface WorkerOptions {
  drain: boolean;
  pool: string | null;
  /** Steps in flight at once, across every loop. */
  concurrency: number;
  /** The postgres.js pool's size: claims, batched completions, heartbeats and settles share it. */
  connections: number;
  /** Claim loops (runSteps) sharing the pool; the steps in flight are split between them. */
  loops: number;
  graceMs: number;
  pollMs: number;
  types: string | null;
}

/**
 * Chosen by `npm run bench -- --cli` (bench/README.md): 512 steps in 2 loops of 256 over 4
 * connections drained no-op jobs faster than 256 in 2 loops of 128 (the bench's own runner), 512
 * in 4 loops of 128, or 256 in 4 loops of 64: a bigger claim costs the server less per job.
 */
export const WORKER_DEFAULTS = { concurrency: 512, connections: 4, graceMs: 10_000, pollMs: 200 } as const;
/** Without --loops: a loop per this many steps in flight (rounded up), so a claim takes up to this many jobs. */
export const STEPS_PER_LOOP = 256;
export const MAX_CONCURRENCY = 1000;
/** A bound against typos; the server's own limit is checked at start (connection-limit.ts). */
export const MAX_CONNECTIONS = 1000;

export const WORKER_USAGE = `usage: npm run worker -- [options]
  --drain             exit when nothing is due (default: run until SIGTERM/SIGINT/SIGHUP)
  --pool P            claim only jobs of pool P
  --concurrency N     steps in flight at once, 1 to ${MAX_CONCURRENCY} (default ${WORKER_DEFAULTS.concurrency})
  --connections N     database connections, 1 to ${MAX_CONNECTIONS} and what the server allows (default ${WORKER_DEFAULTS.connections})
  --loops N           claim loops sharing the steps, 1 to --connections and --concurrency
                      (default: one per ${STEPS_PER_LOOP} steps, at most --connections)
  --grace-ms MS       on a stop, how long in-flight steps may finish (default ${WORKER_DEFAULTS.graceMs})
  --poll-ms MS        longest wait between claims while nothing is due (default ${WORKER_DEFAULTS.pollMs})
  --types FILE        a module whose default export is an array of extra job types
  -h, --help          this help`;

export class WorkerUsageError extends Error {}

export function parseWorkerOptions(argv: string[]): WorkerOptions {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        drain: { type: 'boolean', default: false },
        pool: { type: 'string' },
        concurrency: { type: 'string' },
        connections: { type: 'string' },
        loops: { type: 'string' },
        'grace-ms': { type: 'string' },
        'poll-ms': { type: 'string' },
        types: { type: 'string' },
      },
    }));
  } catch (error) {
    throw new WorkerUsageError((error as Error).message);
  }
  const int = (name: string, min: number, max: number, fallback: number): number => {
    const raw = values[name];
    if (raw === undefined) return fallback;
    const n = Number(raw);
    if (raw === '' || !Number.isInteger(n) || n < min || n > max) {
      throw new WorkerUsageError(`--${name} must be an integer from ${min} to ${max}, got "${String(raw)}"`);
    }
    return n;
  };
  const concurrency = int('concurrency', 1, MAX_CONCURRENCY, WORKER_DEFAULTS.concurrency);
  const connections = int('connections', 1, MAX_CONNECTIONS, WORKER_DEFAULTS.connections);
  const loops = int('loops', 1, MAX_CONCURRENCY, defaultLoops(concurrency, connections));
  if (loops > connections) throw new WorkerUsageError(`--loops ${loops} is more than --connections ${connections}: each loop needs a connection for its claims`);
  if (loops > concurrency) throw new WorkerUsageError(`--loops ${loops} is more than --concurrency ${concurrency}: each loop runs at least one step`);
  return {
    drain: values.drain === true,
    pool: (values.pool as string | undefined) ?? null,
    concurrency,
    connections,
    loops,
    graceMs: int('grace-ms', 0, 3_600_000, WORKER_DEFAULTS.graceMs),
    pollMs: int('poll-ms', 1, 3_600_000, WORKER_DEFAULTS.pollMs),
    types: (values.types as string | undefined) ?? null,
  };
}

/** One loop per STEPS_PER_LOOP steps in flight, at most one per connection. */
export function defaultLoops(concurrency: number, connections: number): number {
  return Math.max(1, Math.min(connections, Math.ceil(concurrency / STEPS_PER_LOOP)));
}

/** The steps in flight of each loop: `concurrency` split as evenly as whole steps allow. */
export function loopConcurrencies(concurrency: number, loops: number): number[] {
  return Array.from({ length: loops }, (_, i) => Math.floor(concurrency / loops) + (i < concurrency % loops ? 1 : 0));
}
