import { enqueueBatch } from '../queue/enqueue.ts';
import { percentile } from './stats.ts';
import { settleDatabase } from './server.ts';
import {
  cpuBetween, JOB_TYPE, jobRows, minuteBetween, sampleAll, SETTLE_TIMEOUT_MS, splitTimes, waitSettled, wallNow,
  type E2eCpu, type Stack,
} from './e2e-stack.ts';

// Draining through the Worker: HTTP batches and the kicks they start, and one tick alone.

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

/**
 * Drain by the tick alone: `jobs` queued with the SQL enqueue function (as another service would,
 * so no kick), then one per-minute tick fired through /__scheduled: one invocation, its 20 s budget.
 */
export async function workerTickDrain(stack: Stack, jobs: number): Promise<E2eTickDrainResult> {
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
