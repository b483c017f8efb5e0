import { setTimeout as sleep } from 'node:timers/promises';
import { percentile } from './stats.ts';
import { settleDatabase } from './server.ts';
import { enqueueOne, jobRows, minuteBetween, SETTLE_TIMEOUT_MS, splitTimes, waitSettled, type Stack } from './e2e-stack.ts';

// One job at a time through the Worker: the fixed cost of a request on the idle stack, and a
// steady rate of single enqueues.

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

export async function requestOverhead(stack: Stack): Promise<E2eRequestOverhead> {
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
export async function workerSteady(stack: Stack, rate: number, seconds: number): Promise<E2eSteadyResult> {
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
