import { parseArgs } from 'node:util';
import type { BenchSettings } from './systems/types.ts';

export interface BenchArgs {
  settings: BenchSettings;
  jobs: number;
  runs: number;
  modes: ('burn-down' | 'steady')[];
  rate: number;
  seconds: number;
  /** Systems to run (all when absent). */
  only: string[] | null;
  scale: boolean;
  /** Scale check: finished and queued rows of the loaded table. */
  scaleFinished: number;
  scaleQueued: number;
  out: string;
  /** End-to-end through `wrangler dev` (the `npm start` stack) instead of the systems. */
  e2e: E2eArgs & { enabled: boolean };
}

export interface E2eArgs {
  /** Burn-down: jobs enqueued over HTTP. */
  jobs: number;
  /** Jobs per POST /v1/jobs/batch. */
  batch: number;
  /** Batch requests in flight at once. */
  inFlight: number;
  /** Steady: POST /v1/jobs per second, one job each. */
  rate: number;
  seconds: number;
}

const USAGE = `npm run bench -- [options]
  --jobs N            burn-down jobs (default 50000)
  --runs N            runs per cell; the median is reported (default 3)
  --connections N     database connections per system (default 4)
  --concurrency N     jobs in flight per system (default 256)
  --batch N           jobs per claim for loop-based systems (default 128)
  --idle-poll-ms N    idle poll interval where a system polls (default 25)
  --mode M            burn-down | steady | both (default both)
  --rate N            steady: jobs enqueued per second, one at a time (default 100)
  --seconds N         steady: how long (default 10)
  --only a,b          systems: starbase, graphile-worker, pg-boss, raw-floor
  --scale             the scale check instead (empty table vs. loaded table)
  --scale-finished N  scale: finished rows (default 1000000)
  --scale-queued N    scale: queued rows (default 100000)
  --e2e               end to end through the Worker under wrangler dev (the npm start stack):
                      HTTP enqueue + kick + cron tick, beside the Node runner on the same load;
                      --runs and --mode apply; results under the "e2e" key of --out
  --e2e-jobs N        e2e burn-down: jobs enqueued over HTTP (default 2000)
  --e2e-batch N       e2e burn-down: jobs per POST /v1/jobs/batch (default 100, at most 1000)
  --e2e-in-flight N   e2e burn-down: batch requests in flight (default 2)
  --e2e-rate N        e2e steady: POST /v1/jobs per second, one job each (default 20)
  --e2e-seconds N     e2e steady: how long (default 10)
  --out FILE          results file (default bench/results.json; each mode writes its own key)`;

export function parseBenchArgs(argv: string[]): BenchArgs {
  const { values } = parseArgs({
    args: argv,
    options: {
      jobs: { type: 'string' },
      runs: { type: 'string' },
      connections: { type: 'string' },
      concurrency: { type: 'string' },
      batch: { type: 'string' },
      'idle-poll-ms': { type: 'string' },
      mode: { type: 'string' },
      rate: { type: 'string' },
      seconds: { type: 'string' },
      only: { type: 'string' },
      scale: { type: 'boolean' },
      'scale-finished': { type: 'string' },
      'scale-queued': { type: 'string' },
      out: { type: 'string' },
      e2e: { type: 'boolean' },
      'e2e-jobs': { type: 'string' },
      'e2e-batch': { type: 'string' },
      'e2e-in-flight': { type: 'string' },
      'e2e-rate': { type: 'string' },
      'e2e-seconds': { type: 'string' },
      help: { type: 'boolean' },
    },
  });
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const int = (name: string, value: string | undefined, fallback: number, min = 1): number => {
    if (value === undefined) return fallback;
    const n = Number(value);
    if (!Number.isInteger(n) || n < min) throw new Error(`--${name} must be an integer >= ${min}, got "${value}"\n\n${USAGE}`);
    return n;
  };
  const mode = values.mode ?? 'both';
  if (!['burn-down', 'steady', 'both'].includes(mode)) throw new Error(`--mode must be burn-down, steady or both\n\n${USAGE}`);
  return {
    settings: {
      connections: int('connections', values.connections, 4, 2),
      concurrency: int('concurrency', values.concurrency, 256),
      batch: int('batch', values.batch, 128),
      idlePollMs: int('idle-poll-ms', values['idle-poll-ms'], 25),
    },
    jobs: int('jobs', values.jobs, 50_000),
    runs: int('runs', values.runs, 3),
    modes: mode === 'both' ? ['burn-down', 'steady'] : [mode as 'burn-down' | 'steady'],
    rate: int('rate', values.rate, 100),
    seconds: int('seconds', values.seconds, 10),
    only: values.only ? values.only.split(',').map((s) => s.trim()) : null,
    scale: values.scale ?? false,
    scaleFinished: int('scale-finished', values['scale-finished'], 1_000_000, 0),
    scaleQueued: int('scale-queued', values['scale-queued'], 100_000),
    out: values.out ?? 'bench/results.json',
    e2e: {
      enabled: values.e2e ?? false,
      jobs: int('e2e-jobs', values['e2e-jobs'], 2_000),
      batch: Math.min(1000, int('e2e-batch', values['e2e-batch'], 100)),
      inFlight: int('e2e-in-flight', values['e2e-in-flight'], 2),
      rate: int('e2e-rate', values['e2e-rate'], 20),
      seconds: int('e2e-seconds', values['e2e-seconds'], 10),
    },
  };
}
