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
  /** The Worker's clock on the `npm start` stack, for this tree and optionally a base commit. */
  clock: E2eClockArgs & { enabled: boolean };
  /** `npm run worker` as a child process beside the in-process runner (bench/cli.ts). */
  cli: CliArgs;
  /** A steady load enqueued in batches, with each system's retention running (bench/sustained.ts). */
  sustained: SustainedArgs & { enabled: boolean };
}

export interface CliArgs {
  enabled: boolean;
  /** Extra worker arguments for a second CLI variant (the first runs at the worker's defaults). */
  args: string[];
}

export interface SustainedArgs {
  /** Jobs enqueued per second, in batches every 10 ms. */
  rate: number;
  seconds: number;
}

export interface E2eClockArgs {
  /** A git ref checked out into a temporary folder and measured beside this tree; null: this tree only. */
  base: string | null;
  /** A shorter run of every figure, for a quick look. */
  quick: boolean;
  /** Multi-step job: steps of the `countdown` job, and the delay between them. */
  steps: number;
  stepDelayMs: number;
  /** Jobs inserted with SQL, one at a time, at random moments of a window this long. */
  inserts: number;
  insertWindowSeconds: number;
  /** Pushes through POST /v1/pushes, at random moments of a window this long. */
  pushes: number;
  pushWindowSeconds: number;
  /** How long the stacks sit idle while their cost is counted. */
  idleSeconds: number;
}

/** The clock figures' sizes: the full run, and the quick look (--e2e-clock-quick). */
const CLOCK_DEFAULTS = {
  full: { steps: 30, stepDelayMs: 2000, inserts: 10, insertWindowSeconds: 120, pushes: 10, pushWindowSeconds: 120, idleSeconds: 120 },
  quick: { steps: 10, stepDelayMs: 2000, inserts: 3, insertWindowSeconds: 30, pushes: 3, pushWindowSeconds: 30, idleSeconds: 30 },
};

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

const USAGE = `usage: npm run bench -- [options]
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
  --e2e-clock         the Worker's clock on the npm start stack: a multi-step job inserted with SQL,
                      SQL inserts, pushed builds, the burn-down and the idle cost; results under
                      the "e2eClock" key of --out
  --base REF          with --e2e-clock (implied): also measure this git ref (a commit id, a branch,
                      origin/main), checked out into a temporary folder with its own stack and
                      database, and print each figure as current / base
  --e2e-clock-quick   --e2e-clock with fewer steps, inserts and pushes, shorter windows and one
                      burn-down run of 500 jobs (--runs, --e2e-jobs), for a quick look
  --clock-steps N     multi-step job: countdown steps, 2 s apart (default 30; quick 10)
  --clock-inserts N   jobs inserted with SQL over --clock-window seconds (default 10; quick 3)
  --clock-pushes N    pushes over --clock-window seconds (default 10; quick 3)
  --clock-window N    seconds over which inserts and pushes are spread (default 120; quick 30)
  --idle-seconds N    idle window whose cost is counted (default 120; quick 30)
  --cli               npm run worker -- --drain (a child process, at its defaults) beside the
                      in-process runner on --jobs queued jobs; --runs apply; results under "cli"
  --cli-args="A B"    with --cli (implied): also run the worker with these extra arguments
                      (written with "=", as they start with a dash)
  --sustained         a steady load in batches (each system's bulk enqueue) with each system's
                      retention running, compressed in time (10 s, swept every second): CPU per
                      job, jobs/s, enqueue->start latency, rows left; --runs and --only apply;
                      results under the "sustained" key of --out
  --sustained-rate N  sustained: jobs enqueued per second (default 2000)
  --sustained-seconds N  sustained: how long (default 60)
  --out FILE          results file (default bench/results.json; each mode writes its own key)`;

/** A refusal of the bench's arguments: `npm run bench` prints it and a pointer to --help. */
export class BenchUsageError extends Error {}

export function parseBenchArgs(argv: string[]): BenchArgs {
  // its refusals (an unknown option, a missing value) are the bench's usage errors
  const { values } = (() => {
    try {
      return parseArgs({
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
          'e2e-clock': { type: 'boolean' },
          'e2e-clock-quick': { type: 'boolean' },
          base: { type: 'string' },
          'clock-steps': { type: 'string' },
          'clock-inserts': { type: 'string' },
          'clock-pushes': { type: 'string' },
          'clock-window': { type: 'string' },
          'idle-seconds': { type: 'string' },
          sustained: { type: 'boolean' },
          'sustained-rate': { type: 'string' },
          'sustained-seconds': { type: 'string' },
          help: { type: 'boolean' },
          cli: { type: 'boolean' },
          'cli-args': { type: 'string' },
        },
      });
    } catch (error) {
      throw new BenchUsageError((error as Error).message);
    }
  })();
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const int = (name: string, value: string | undefined, fallback: number, min = 1): number => {
    if (value === undefined) return fallback;
    const n = Number(value);
    if (!Number.isInteger(n) || n < min) throw new BenchUsageError(`--${name} must be an integer >= ${min}, got "${value}"`);
    return n;
  };
  const mode = values.mode ?? 'both';
  if (!['burn-down', 'steady', 'both'].includes(mode)) throw new BenchUsageError(`--mode must be burn-down, steady or both`);
  if (values.base !== undefined && !/^[\w./@^~{}-]+$/.test(values.base)) {
    throw new BenchUsageError(`--base must be a git ref (a commit id, a branch or a tag), got "${values.base}"`);
  }
  const quick = values['e2e-clock-quick'] ?? false;
  const sizes = quick ? CLOCK_DEFAULTS.quick : CLOCK_DEFAULTS.full;
  const window = int('clock-window', values['clock-window'], sizes.insertWindowSeconds);
  return {
    settings: {
      connections: int('connections', values.connections, 4, 2),
      concurrency: int('concurrency', values.concurrency, 256),
      batch: int('batch', values.batch, 128),
      idlePollMs: int('idle-poll-ms', values['idle-poll-ms'], 25),
    },
    jobs: int('jobs', values.jobs, 50_000),
    runs: int('runs', values.runs, quick ? 1 : 3),
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
      jobs: int('e2e-jobs', values['e2e-jobs'], quick ? 500 : 2_000),
      batch: Math.min(1000, int('e2e-batch', values['e2e-batch'], 100)),
      inFlight: int('e2e-in-flight', values['e2e-in-flight'], 2),
      rate: int('e2e-rate', values['e2e-rate'], 20),
      seconds: int('e2e-seconds', values['e2e-seconds'], 10),
    },
    cli: {
      enabled: (values.cli ?? false) || values['cli-args'] !== undefined,
      args: (values['cli-args'] ?? '').split(/\s+/).filter(Boolean),
    },
    clock: {
      enabled: (values['e2e-clock'] ?? false) || quick || values.base !== undefined,
      base: values.base ?? null,
      quick,
      steps: int('clock-steps', values['clock-steps'], sizes.steps),
      stepDelayMs: sizes.stepDelayMs,
      inserts: int('clock-inserts', values['clock-inserts'], sizes.inserts),
      insertWindowSeconds: window,
      pushes: int('clock-pushes', values['clock-pushes'], sizes.pushes),
      pushWindowSeconds: window,
      idleSeconds: int('idle-seconds', values['idle-seconds'], sizes.idleSeconds),
    },
    sustained: {
      enabled: values.sustained ?? false,
      rate: int('sustained-rate', values['sustained-rate'], 2_000),
      seconds: int('sustained-seconds', values['sustained-seconds'], 60),
    },
  };
}

