import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { connect, type Sql } from '../queue/db.ts';
import { finishCounts, jobTimes, type JobTimes as JobRow } from '../queue/driver/benchmark.ts';
import { enqueueBatch } from '../queue/enqueue.ts';
import { PROJECT_ROOT } from '../scripts/lib/cli.ts';
import { launchDevStack, type LaunchedDevStack } from '../scripts/lib/dev-stack.ts';
import type { BenchArgs } from './args.ts';
import { cpuPerThousand, processTreeTicks, sampleCpu, treeCpuPerThousand, type CpuSample } from './cpu.ts';
import { burnDown, steady, type BurnDownResult, type SteadyResult } from './modes.ts';
import { machine, writeResults } from './report.ts';
import { settleDatabase, type BenchServer } from './server.ts';
import { median, medianRun, percentile } from './stats.ts';
import { engineSystem } from './systems/engine.ts';
import { engineVersion } from './versions.ts';

/**
 * `npm run bench -- --e2e`: the engine through the real Worker as `npm start` runs it — wrangler
 * dev (workerd), Hyperdrive's local connection string, the sandbox, the cron driver firing the
 * per-minute tick through wrangler dev's /__scheduled — driven over HTTP only: enqueue with the
 * bearer token, the kick each accepted enqueue drains in waitUntil, and the tick as the safety
 * net. Timings of the jobs come from their rows (Postgres' clock; the bench runs on the same
 * machine, so its wall clock is the same clock). Beside it, the Node runner (`runSteps` in this
 * process, as in the main bench) on the same number of jobs and the same steady rate.
 */

/** A built-in sample type every deployment registers: one step, no I/O. */
const JOB_TYPE = 'uppercase';
/** The end of every job of a run, after which the run has failed: a minute tick plus its 20 s budget fits. */
const SETTLE_TIMEOUT_MS = 150_000;
/** Latest output kept from the stack (`npm start` runs wrangler dev at --log-level warn: warnings and errors). */
const OUTPUT_LIMIT = 200_000;

export interface E2eCpu {
  /** Per 1,000 jobs, ms: the Postgres server, workerd, wrangler's Node process, the rest of `npm start` (sandbox), this process. */
  postgresMs: number | null;
  workerdMs: number;
  wranglerMs: number;
  devScriptMs: number;
  benchMs: number;
}

/** Where a job's time went, from its row: creation (enqueue transaction) → first claim → finished. */
interface JobTimes {
  /** HTTP call start (this process) → created_at. */
  toCreatedMs: number[];
  /** created_at → started_at (first claim): the kick (or the tick) finding it. */
  createdToClaimMs: number[];
  /** started_at → finished_at: the step and its settle. */
  claimToFinishedMs: number[];
}

export interface E2eBurnDownResult {
  jobs: number;
  batch: number;
  requestsInFlight: number;
  /** First request sent → last accepted. */
  enqueueSeconds: number;
  enqueuePerSec: number;
  /** One batch request: call start → answer. */
  batchHttpP50Ms: number;
  batchHttpP99Ms: number;
  /** First started_at → last finished_at. */
  seconds: number;
  jobsPerSec: number;
  /** Last batch answered → last finished_at: what the kicks still had to drain once enqueueing stopped. */
  tailSeconds: number;
  createdToClaimP50Ms: number;
  createdToClaimP99Ms: number;
  claimToFinishedP50Ms: number;
  /** Distinct invocations (claim owners) that claimed the run's jobs. */
  invocations: number;
  /** Whether a minute boundary (the cron driver's tick) fell between the first claim and the last settle. */
  minuteTickInWindow: boolean;
  cpu: E2eCpu;
}

export interface E2eTickDrainResult {
  jobs: number;
  /** First started_at → last finished_at. */
  seconds: number;
  jobsPerSec: number;
  claimToFinishedP50Ms: number;
  /** 1 unless the cron driver's minute tick also drained (a minute boundary fell in the window). */
  invocations: number;
  cpu: E2eCpu;
}

/** Fixed costs of one request through wrangler dev, measured on the idle stack (sequential calls). */
export interface E2eRequestOverhead {
  /** A route that touches nothing (404): wrangler's proxy, workerd, Hono. */
  noDatabaseP50Ms: number;
  /** GET /healthz: the same plus a new Postgres connection (through Hyperdrive's local string) and `select 1`. */
  healthzP50Ms: number;
  /** POST /v1/jobs: the same plus auth, body parsing, the enqueue statement. */
  enqueueP50Ms: number;
}

export interface E2eSteadyResult {
  sent: number;
  offeredPerSec: number;
  /** POST /v1/jobs: call start → 201. */
  httpP50Ms: number;
  httpP99Ms: number;
  /** POST /v1/jobs call start → the job's first claim (started_at). */
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  toCreatedP50Ms: number;
  createdToClaimP50Ms: number;
  createdToClaimP99Ms: number;
  claimToFinishedP50Ms: number;
  invocations: number;
  minuteTickInWindow: boolean;
}

export interface Stack {
  api: LaunchedDevStack['api'];
  baseUrl: string;
  probe: Sql;
  rootPid: number;
  postmaster: number | null;
}

const wallNow = () => performance.timeOrigin + performance.now();

export async function runE2e(server: BenchServer, args: BenchArgs): Promise<void> {
  const { e2e } = args;
  const runs = args.runs;
  console.log(
    `end-to-end: burn-down ${e2e.jobs} ${JOB_TYPE} jobs in batches of ${e2e.batch} (${e2e.inFlight} requests in flight); ` +
      `steady ${e2e.rate}/s for ${e2e.seconds} s, one POST /v1/jobs each; ${runs} runs; beside: the Node runner on the same jobs and rate`,
  );
  const version = engineVersion();
  const workerVars = { ...wranglerVars(['STEP_CONCURRENCY', 'KICK_BUDGET_MS', 'TICK_BUDGET_MS']), ...devVars() };
  console.log(`Worker settings: ${Object.entries(workerVars).map(([k, v]) => `${k}=${v}`).join(', ')} (wrangler.toml [vars], then STARBASE_DEV_VARS)`);
  const node = { burnDown: [] as BurnDownResult[], steady: [] as SteadyResult[], failures: [] as string[] };
  const worker = {
    burnDown: [] as E2eBurnDownResult[],
    tickDrain: [] as E2eTickDrainResult[],
    steady: [] as E2eSteadyResult[],
    overhead: null as E2eRequestOverhead | null,
    failures: [] as string[],
  };

  // The Node runner first (fresh database per run, as in the main bench), while no stack runs.
  const system = engineSystem(version);
  for (let run = 1; run <= runs; run++) {
    for (const mode of args.modes) {
      try {
        if (mode === 'burn-down') {
          const r = await burnDown(server, system, args.settings, e2e.jobs);
          node.burnDown.push(r);
          console.log(`  node burn-down run ${run}: ${Math.round(r.jobsPerSec)} jobs/s (${r.seconds.toFixed(2)} s)`);
        } else {
          const r = await steady(server, system, args.settings, { rate: e2e.rate, seconds: e2e.seconds });
          node.steady.push(r);
          console.log(`  node steady run ${run}: enqueue → start p50 ${r.p50Ms.toFixed(1)} ms, p99 ${r.p99Ms.toFixed(1)} ms`);
        }
      } catch (error) {
        node.failures.push(`${mode} run ${run}: ${(error as Error).message}`);
        console.log(`  node ${mode} run ${run} FAILED: ${(error as Error).message}`);
      }
    }
  }

  // One `npm start` stack for every Worker run (boot takes wrangler's build and workerd's start).
  const db = await server.freshDatabase('e2e');
  const dataDir = mkdtempSync(join(tmpdir(), 'starbase-bench-e2e-'));
  let launched: LaunchedDevStack | undefined;
  let probe: Sql | undefined;
  const teardown = async () => {
    await launched?.stop();
    await probe?.end({ timeout: 5 });
    await db.drop();
    rmSync(dataDir, { recursive: true, force: true });
  };
  const onSignal = (signal: NodeJS.Signals) => {
    console.log(`${signal}: stopping the stack`);
    void teardown()
      .then(() => server.close())
      .finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    const booting = performance.now();
    launched = await launchDevStack({ databaseUrl: db.url, dataDir, outputLimit: OUTPUT_LIMIT });
    console.log(`  stack up in ${((performance.now() - booting) / 1000).toFixed(1)} s at ${launched.baseUrl} (wrangler dev, pid ${launched.child.pid})`);
    probe = connect(db.url, { max: 2 });
    const stack: Stack = {
      api: launched.api,
      baseUrl: launched.baseUrl,
      probe,
      rootPid: launched.child.pid!,
      postmaster: server.postmaster,
    };
    await warmUp(stack);
    worker.overhead = await requestOverhead(stack);
    console.log(
      `  one request on the idle stack, p50 of 50: no database ${worker.overhead.noDatabaseP50Ms.toFixed(1)} ms, ` +
        `GET /healthz ${worker.overhead.healthzP50Ms.toFixed(1)} ms, POST /v1/jobs ${worker.overhead.enqueueP50Ms.toFixed(1)} ms`,
    );
    for (let run = 1; run <= runs; run++) {
      for (const mode of args.modes) {
        try {
          if (mode === 'burn-down') {
            const r = await workerBurnDown(stack, e2e.jobs, e2e.batch, e2e.inFlight);
            worker.burnDown.push(r);
            console.log(
              `  worker burn-down run ${run}: ${Math.round(r.jobsPerSec)} jobs/s (${r.seconds.toFixed(2)} s, the last ${r.tailSeconds.toFixed(2)} s after the last enqueue), ` +
                `enqueue ${Math.round(r.enqueuePerSec)} jobs/s over HTTP (batch p50 ${r.batchHttpP50Ms.toFixed(0)} ms), ` +
                `created → claim p50 ${r.createdToClaimP50Ms.toFixed(0)} ms, p99 ${r.createdToClaimP99Ms.toFixed(0)} ms, ` +
                `${r.invocations} invocations${r.minuteTickInWindow ? ' (a minute tick fell in the window)' : ''}; CPU per 1k jobs: postgres ${fmtMs(r.cpu.postgresMs)}, ` +
                `workerd ${fmtMs(r.cpu.workerdMs)}, wrangler ${fmtMs(r.cpu.wranglerMs)}, npm start ${fmtMs(r.cpu.devScriptMs)}, bench ${fmtMs(r.cpu.benchMs)} ms`,
            );
            try {
              const t = await workerTickDrain(stack, e2e.jobs);
              worker.tickDrain.push(t);
              console.log(
                `  worker tick drain run ${run}: ${Math.round(t.jobsPerSec)} jobs/s (${t.seconds.toFixed(2)} s, ${t.invocations} invocations), ` +
                  `claim → finished p50 ${t.claimToFinishedP50Ms.toFixed(1)} ms; CPU per 1k jobs: postgres ${fmtMs(t.cpu.postgresMs)}, ` +
                  `workerd ${fmtMs(t.cpu.workerdMs)}, wrangler ${fmtMs(t.cpu.wranglerMs)} ms`,
              );
            } catch (error) {
              worker.failures.push(`tick drain run ${run}: ${(error as Error).message}`);
              console.log(`  worker tick drain run ${run} FAILED: ${(error as Error).message}`);
            }
          } else {
            const r = await workerSteady(stack, e2e.rate, e2e.seconds);
            worker.steady.push(r);
            console.log(
              `  worker steady run ${run}: HTTP call → claim p50 ${r.p50Ms.toFixed(1)} ms, p99 ${r.p99Ms.toFixed(1)} ms, max ${r.maxMs.toFixed(1)} ms; ` +
                `POST p50 ${r.httpP50Ms.toFixed(1)} ms, p99 ${r.httpP99Ms.toFixed(1)} ms; call → created_at p50 ${r.toCreatedP50Ms.toFixed(1)} ms, ` +
                `created → claim p50 ${r.createdToClaimP50Ms.toFixed(1)} ms, claim → finished p50 ${r.claimToFinishedP50Ms.toFixed(1)} ms ` +
                `(${Math.round(r.offeredPerSec)}/s offered, ${r.invocations} invocations${r.minuteTickInWindow ? ', a minute tick fell in the window' : ''})`,
            );
          }
        } catch (error) {
          worker.failures.push(`${mode} run ${run}: ${(error as Error).message}`);
          console.log(`  worker ${mode} run ${run} FAILED: ${(error as Error).message}`);
        }
      }
    }
  } catch (error) {
    if (launched) console.error(launched.output().slice(-5_000));
    throw error;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await teardown();
  }

  const summary = summarizeE2e(node, worker);
  console.log(`\n${e2eTable(summary)}\n`);
  const end = machine();
  console.log(`load average at the end: ${end.loadAverage}; commit ${version}`);
  writeResults(args.out, {
    e2e: {
      at: new Date().toISOString(),
      machine: end,
      postgres: await server.describe(),
      embedded: server.embedded,
      engine: version,
      jobType: JOB_TYPE,
      args: { ...e2e, runs, modes: args.modes, nodeSettings: args.settings },
      workerVars,
      node,
      worker,
      summary,
    },
  });
  console.log(`wrote the e2e key of ${args.out}`);
}

/** Values of wrangler.toml's [vars] (the deployed defaults). */
function wranglerVars(names: string[]): Record<string, string> {
  const toml = readFileSync(`${PROJECT_ROOT}wrangler.toml`, 'utf8');
  const out: Record<string, string> = {};
  for (const name of names) {
    const m = new RegExp(`^${name}\\s*=\\s*"([^"]*)"`, 'm').exec(toml);
    if (m) out[name] = m[1]!;
  }
  return { ...out, LOG_STEPS: 'true (default)' };
}

/** Overrides `npm start` passes to the Worker (e.g. STARBASE_DEV_VARS='{"LOG_STEPS":"false"}'). */
function devVars(): Record<string, string> {
  return JSON.parse(process.env.STARBASE_DEV_VARS ?? '{}') as Record<string, string>;
}

const fmtMs = (n: number | null) => (n === null ? '?' : n.toFixed(0));

/** The first requests of an isolate compile and sync the registry: a few jobs, untimed, before any run. */
export async function warmUp(stack: Stack): Promise<void> {
  const ids: string[] = [];
  for (let i = 0; i < 10; i++) ids.push((await enqueueOne(stack)).id);
  await waitSettled(stack, ids, 60_000);
}

async function enqueueOne(stack: Stack): Promise<{ id: string; startedAt: number; httpMs: number }> {
  const startedAt = wallNow();
  const t = performance.now();
  const res = await stack.api('/v1/jobs', { method: 'POST', body: JSON.stringify({ type: JOB_TYPE, payload: { text: 'e2e' } }) });
  const httpMs = performance.now() - t;
  if (res.status !== 201) throw new Error(`POST /v1/jobs answered ${res.status}: ${await res.text()}`);
  const { job } = (await res.json()) as { job: { id: string } };
  return { id: job.id, startedAt, httpMs };
}

export async function waitSettled(stack: Stack, ids: string[], timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const row = await finishCounts(stack.probe, ids);
    if (row.bad > 0) throw new Error(`${row.bad} jobs ended other than done`);
    if (row.open === 0) return;
    if (performance.now() > deadline) throw new Error(`${row.open} of ${ids.length} jobs not finished after ${timeoutMs / 1000} s`);
    await sleep(20);
  }
}

/** Epoch ms (fractional) of the jobs' rows, and how many invocations claimed them. */
async function jobRows(stack: Stack, ids: string[]): Promise<{ rows: JobRow[]; invocations: number }> {
  return jobTimes(stack.probe, ids);
}

function sampleAll(stack: Stack): { own: CpuSample; tree: Record<string, number> } {
  return { own: sampleCpu(stack.postmaster), tree: processTreeTicks(stack.rootPid) };
}

function cpuBetween(before: ReturnType<typeof sampleAll>, after: ReturnType<typeof sampleAll>, jobs: number): E2eCpu {
  const own = cpuPerThousand(before.own, after.own, jobs);
  const tree = treeCpuPerThousand(before.tree, after.tree, jobs);
  return { postgresMs: own.postgresMs, workerdMs: tree.workerd!, wranglerMs: tree.wrangler!, devScriptMs: tree.other!, benchMs: own.nodeMs };
}

/** Burn-down through the Worker: `jobs` enqueued in batch requests, drained by the kicks they start (and ticks). */
export async function workerBurnDown(stack: Stack, jobs: number, batch: number, inFlight: number): Promise<E2eBurnDownResult> {
  await settleDatabase(stack.probe);
  const before = sampleAll(stack);
  const ids: string[] = [];
  const httpMs: number[] = [];
  const t0 = performance.now();
  let next = 0;
  const sender = async () => {
    while (next < jobs) {
      const size = Math.min(batch, jobs - next);
      next += size;
      const body = JSON.stringify({ jobs: Array.from({ length: size }, () => ({ type: JOB_TYPE, payload: { text: 'e2e' } })) });
      const t = performance.now();
      const res = await stack.api('/v1/jobs/batch', { method: 'POST', body });
      if (res.status !== 201) throw new Error(`POST /v1/jobs/batch answered ${res.status}: ${await res.text()}`);
      const answer = (await res.json()) as { jobs: Array<{ id: string }> };
      httpMs.push(performance.now() - t);
      for (const job of answer.jobs) ids.push(job.id);
    }
  };
  await Promise.all(Array.from({ length: inFlight }, sender));
  const enqueueSeconds = (performance.now() - t0) / 1000;
  const enqueueEnd = wallNow();
  await waitSettled(stack, ids, SETTLE_TIMEOUT_MS);
  const after = sampleAll(stack);
  const { rows, invocations } = await jobRows(stack, ids);
  const first = Math.min(...rows.map((r) => r.started));
  const last = Math.max(...rows.map((r) => r.finished));
  const seconds = (last - first) / 1000;
  const times = splitTimes(rows, new Map());
  return {
    jobs,
    batch,
    requestsInFlight: inFlight,
    enqueueSeconds,
    enqueuePerSec: jobs / enqueueSeconds,
    batchHttpP50Ms: percentile(httpMs, 50),
    batchHttpP99Ms: percentile(httpMs, 99),
    seconds,
    jobsPerSec: jobs / seconds,
    tailSeconds: (last - enqueueEnd) / 1000,
    createdToClaimP50Ms: percentile(times.createdToClaimMs, 50),
    createdToClaimP99Ms: percentile(times.createdToClaimMs, 99),
    claimToFinishedP50Ms: percentile(times.claimToFinishedMs, 50),
    invocations,
    minuteTickInWindow: minuteBetween(first, last),
    cpu: cpuBetween(before, after, jobs),
  };
}

/** The cron driver of `npm start` fires the tick on every wall-clock minute. */
const minuteBetween = (from: number, to: number) => Math.floor(to / 60_000) > Math.floor(from / 60_000);

/**
 * Drain by the tick alone: `jobs` queued with the SQL enqueue function (as another service would,
 * so no kick), then one per-minute tick fired through /__scheduled: one invocation, its 20 s budget.
 */
async function workerTickDrain(stack: Stack, jobs: number): Promise<E2eTickDrainResult> {
  const ids: string[] = [];
  for (let i = 0; i < jobs; i += 1000) {
    const chunk = await enqueueBatch(stack.probe, Array.from({ length: Math.min(1000, jobs - i) }, () => ({ type: JOB_TYPE, payload: { text: 'e2e' } })));
    for (const r of chunk) ids.push(r.job.id);
  }
  await settleDatabase(stack.probe);
  const before = sampleAll(stack);
  const res = await fetch(`${stack.baseUrl}/__scheduled?cron=${encodeURIComponent('* * * * *')}`);
  if (!res.ok) throw new Error(`/__scheduled answered ${res.status}: ${await res.text()}`);
  await waitSettled(stack, ids, SETTLE_TIMEOUT_MS);
  const after = sampleAll(stack);
  const { rows, invocations } = await jobRows(stack, ids);
  const seconds = (Math.max(...rows.map((r) => r.finished)) - Math.min(...rows.map((r) => r.started))) / 1000;
  return {
    jobs,
    seconds,
    jobsPerSec: jobs / seconds,
    claimToFinishedP50Ms: percentile(splitTimes(rows, new Map()).claimToFinishedMs, 50),
    invocations,
    cpu: cpuBetween(before, after, jobs),
  };
}

async function requestOverhead(stack: Stack): Promise<E2eRequestOverhead> {
  const time = async (call: () => Promise<Response>, expect: number): Promise<number> => {
    const samples: number[] = [];
    for (let i = 0; i < 50; i++) {
      const t = performance.now();
      const res = await call();
      await res.arrayBuffer();
      if (res.status !== expect) throw new Error(`expected ${expect}, got ${res.status}`);
      samples.push(performance.now() - t);
    }
    return percentile(samples, 50);
  };
  const ids: string[] = [];
  const result: E2eRequestOverhead = {
    noDatabaseP50Ms: await time(() => fetch(`${stack.baseUrl}/bench-no-such-route`), 404),
    healthzP50Ms: await time(() => fetch(`${stack.baseUrl}/healthz`), 200),
    enqueueP50Ms: percentile(
      await (async () => {
        const samples: number[] = [];
        for (let i = 0; i < 50; i++) {
          const r = await enqueueOne(stack);
          ids.push(r.id);
          samples.push(r.httpMs);
        }
        return samples;
      })(),
      50,
    ),
  };
  await waitSettled(stack, ids, 60_000);
  return result;
}

/** Steady through the Worker: one POST /v1/jobs every 1/rate s (not waiting for answers), the kick starts each. */
async function workerSteady(stack: Stack, rate: number, seconds: number): Promise<E2eSteadyResult> {
  await settleDatabase(stack.probe);
  await sleep(1_000); // an idle stack, as between a deployment's requests
  const total = Math.round(rate * seconds);
  const sent: Array<Promise<{ id: string; startedAt: number; httpMs: number }>> = [];
  const start = performance.now();
  for (let i = 0; i < total; ) {
    const due = start + (i * 1000) / rate;
    const now = performance.now();
    if (now < due) {
      await sleep(Math.max(0, Math.min(due - now, 5)));
      continue;
    }
    sent.push(enqueueOne(stack));
    i++;
  }
  const answers = await Promise.all(sent);
  const offeredPerSec = total / ((performance.now() - start) / 1000);
  const ids = answers.map((a) => a.id);
  await waitSettled(stack, ids, SETTLE_TIMEOUT_MS);
  const { rows, invocations } = await jobRows(stack, ids);
  const callStart = new Map(answers.map((a) => [a.id, a.startedAt]));
  const latency = rows.map((r) => r.started - callStart.get(r.id)!);
  const times = splitTimes(rows, callStart);
  const http = answers.map((a) => a.httpMs);
  return {
    sent: total,
    offeredPerSec,
    httpP50Ms: percentile(http, 50),
    httpP99Ms: percentile(http, 99),
    p50Ms: percentile(latency, 50),
    p99Ms: percentile(latency, 99),
    maxMs: percentile(latency, 100),
    toCreatedP50Ms: percentile(times.toCreatedMs, 50),
    createdToClaimP50Ms: percentile(times.createdToClaimMs, 50),
    createdToClaimP99Ms: percentile(times.createdToClaimMs, 99),
    claimToFinishedP50Ms: percentile(times.claimToFinishedMs, 50),
    invocations,
    minuteTickInWindow: minuteBetween(Math.min(...rows.map((r) => r.started)), Math.max(...rows.map((r) => r.finished))),
  };
}

function splitTimes(rows: JobRow[], callStart: Map<string, number>): JobTimes {
  return {
    toCreatedMs: rows.filter((r) => callStart.has(r.id)).map((r) => r.created - callStart.get(r.id)!),
    createdToClaimMs: rows.map((r) => r.started - r.created),
    claimToFinishedMs: rows.map((r) => r.finished - r.started),
  };
}

export interface E2eSummaryRow {
  path: string;
  jobsPerSec: number | null;
  jobsPerSecRuns: number[];
  enqueuePerSec: number | null;
  /** CPU ms per 1,000 burn-down jobs (medians): the server, and the Worker's processes (workerd + wrangler). */
  postgresCpuMs: number | null;
  workerCpuMs: number | null;
  steadyP50Ms: number | null;
  steadyP99Ms: number | null;
  httpP50Ms: number | null;
  httpP99Ms: number | null;
  offeredPerSec: number | null;
  failedRuns: number;
}

const medianOf = <T>(runs: T[], key: (r: T) => number | null): number | null => {
  const values = runs.map(key).filter((v): v is number => v !== null);
  return values.length ? median(values) : null;
};

function summarizeE2e(
  node: { burnDown: BurnDownResult[]; steady: SteadyResult[]; failures: string[] },
  worker: { burnDown: E2eBurnDownResult[]; tickDrain: E2eTickDrainResult[]; steady: E2eSteadyResult[]; failures: string[] },
): E2eSummaryRow[] {
  const nodeSteady = node.steady.length ? medianRun(node.steady, (r) => r.p50Ms) : null;
  const workerSteady = worker.steady.length ? medianRun(worker.steady, (r) => r.p50Ms) : null;
  const none = { enqueuePerSec: null, steadyP50Ms: null, steadyP99Ms: null, httpP50Ms: null, httpP99Ms: null, offeredPerSec: null };
  return [
    {
      path: 'Node runner (runSteps in-process)',
      ...none,
      jobsPerSec: medianOf(node.burnDown, (r) => r.jobsPerSec),
      jobsPerSecRuns: node.burnDown.map((r) => Math.round(r.jobsPerSec)),
      postgresCpuMs: medianOf(node.burnDown, (r) => r.cpu.postgresMs),
      workerCpuMs: medianOf(node.burnDown, (r) => r.cpu.nodeMs),
      steadyP50Ms: nodeSteady?.p50Ms ?? null,
      steadyP99Ms: nodeSteady?.p99Ms ?? null,
      offeredPerSec: node.steady.length ? Math.min(...node.steady.map((r) => r.offeredPerSec)) : null,
      failedRuns: node.failures.length,
    },
    {
      path: 'Worker: HTTP batches + kicks (+ tick)',
      jobsPerSec: medianOf(worker.burnDown, (r) => r.jobsPerSec),
      jobsPerSecRuns: worker.burnDown.map((r) => Math.round(r.jobsPerSec)),
      enqueuePerSec: medianOf(worker.burnDown, (r) => r.enqueuePerSec),
      postgresCpuMs: medianOf(worker.burnDown, (r) => r.cpu.postgresMs),
      workerCpuMs: medianOf(worker.burnDown, (r) => r.cpu.workerdMs + r.cpu.wranglerMs),
      steadyP50Ms: workerSteady?.p50Ms ?? null,
      steadyP99Ms: workerSteady?.p99Ms ?? null,
      httpP50Ms: workerSteady?.httpP50Ms ?? null,
      httpP99Ms: workerSteady?.httpP99Ms ?? null,
      offeredPerSec: worker.steady.length ? Math.min(...worker.steady.map((r) => r.offeredPerSec)) : null,
      failedRuns: worker.failures.filter((f) => !f.startsWith('tick')).length,
    },
    {
      path: 'Worker: one tick, pre-queued by SQL',
      ...none,
      jobsPerSec: medianOf(worker.tickDrain, (r) => r.jobsPerSec),
      jobsPerSecRuns: worker.tickDrain.map((r) => Math.round(r.jobsPerSec)),
      postgresCpuMs: medianOf(worker.tickDrain, (r) => r.cpu.postgresMs),
      workerCpuMs: medianOf(worker.tickDrain, (r) => r.cpu.workerdMs + r.cpu.wranglerMs),
      failedRuns: worker.failures.filter((f) => f.startsWith('tick')).length,
    },
  ];
}

const fmt = (n: number | null, digits = 0) =>
  n === null || Number.isNaN(n) ? '—' : n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });

function e2eTable(rows: E2eSummaryRow[]): string {
  const header = [
    'path', 'burn-down jobs/s', 'runs', 'HTTP enqueue jobs/s', 'pg CPU ms/1k', 'runner CPU ms/1k',
    'enqueue→claim p50 ms', 'p99 ms', 'POST p50 ms', 'POST p99 ms', 'offered/s',
  ];
  const cells = rows.map((r) => [
    r.path,
    fmt(r.jobsPerSec),
    [...r.jobsPerSecRuns.map((n) => fmt(n)), ...(r.failedRuns ? [`${r.failedRuns} failed`] : [])].join(' / ') || '—',
    fmt(r.enqueuePerSec),
    fmt(r.postgresCpuMs),
    fmt(r.workerCpuMs),
    fmt(r.steadyP50Ms, 1),
    fmt(r.steadyP99Ms, 1),
    fmt(r.httpP50Ms, 1),
    fmt(r.httpP99Ms, 1),
    fmt(r.offeredPerSec),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const line = (c: string[]) => c.map((v, i) => (i === 0 ? v.padEnd(widths[i]!) : v.padStart(widths[i]!))).join('  ');
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...cells.map(line)].join('\n');
}
