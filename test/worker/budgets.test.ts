import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { drainForAlarm, retryAfterFailureMs } from '../../functions/dispatch/alarm-drain.ts';
import { drain, openInvocation, type Invocation } from '../../functions/invocation.ts';
import { InvocationUsage, withUsage } from '../../functions/usage.ts';
import { defineJobType, done, enqueueBatch, JobRegistry } from '../../queue/index.ts';
import { createWorkerHarness, testEnv, type WorkerHarness } from './support.ts';

/**
 * Issue 16, item 4: each per-invocation budget stops the drain before the limit it guards. Local
 * runs enforce no limit, so what is asserted is the counting and the stop: no claim after a
 * budget is spent, the steps already claimed finish, the rest stay queued for the next invocation.
 */
const FETCHES_PER_STEP = 2;

/** Each step makes two real fetches (to the sandbox) and reads their bodies. */
const fetcher = defineJobType({
  type: 'budget_fetcher',
  payload: z.object({ n: z.number() }),
  async run() {
    for (let i = 0; i < FETCHES_PER_STEP; i++) await (await fetch(`${testEnv.TEST_SANDBOX_URL}/budget-probe`)).text();
    return done();
  },
});

/** A pinned clock the steps move: each step "takes" a second of the invocation's time. */
let pinned = 0;
const slow = defineJobType({
  type: 'budget_slow',
  payload: z.object({ n: z.number() }),
  async run() {
    pinned += 1_000;
    return done();
  },
});

let h: WorkerHarness;
beforeAll(async () => {
  h = await createWorkerHarness({ SUBREQUEST_BUDGET: '10', STEP_CONCURRENCY: '2', CPU_BUDGET_MS: '3000', DISPATCH_SHARDS: '4' } as never);
  await new JobRegistry([fetcher, slow]).sync(h.sql);
});

/** An invocation of the harness's env that runs only `type` (claims skip the other's jobs) on `usage`. */
async function invocationWith(usage: InvocationUsage, type: typeof fetcher | typeof slow, stepConcurrency?: number): Promise<Invocation> {
  const inv = await openInvocation(h.env);
  return { ...inv, registry: new JobRegistry([type]), usage, config: { ...inv.config, stepConcurrency: stepConcurrency ?? inv.config.stepConcurrency } };
}

async function statuses(type: string) {
  return h.sql<{ status: string; n: number }[]>`select status, count(*)::int as n from worker.jobs where type = ${type} group by 1 order by 1`;
}

describe('per-invocation budgets', () => {
  it('the subrequest budget stops claiming once spent; steps in flight finish; the rest wait', async () => {
    await enqueueBatch(h.sql, Array.from({ length: 30 }, (_, n) => ({ type: 'budget_fetcher', payload: { n } })));
    const usage = new InvocationUsage({ cpuMs: 60_000, subrequests: 10, connections: 6 });
    const inv = await invocationWith(usage, fetcher);
    const counts = await withUsage(usage, async () => {
      try {
        return await drain(inv, 30_000);
      } finally {
        await inv.close();
      }
    });
    const used = usage.snapshot();
    expect(used.byKind.fetch).toBe(counts.claimed * FETCHES_PER_STEP); // every fetch counted
    expect(used.subrequests).toBeGreaterThanOrEqual(10);
    // the last claim was made below the budget: at most STEP_CONCURRENCY steps' fetches past it,
    // far inside the Free plan's 50
    expect(used.subrequests).toBeLessThanOrEqual(10 + 2 * FETCHES_PER_STEP + used.byKind.socket);
    expect(counts.claimed).toBeLessThan(30);
    expect(counts.done).toBe(counts.claimed);
    // the connection budget (6): the database client's 4 (6 less 2 steps in flight) and each
    // step's one fetch at a time never exceed it together
    expect(inv.config.databaseConnections).toBe(4);
    expect(used.peakConnections).toBeGreaterThan(0);
    expect(used.peakConnections).toBeLessThanOrEqual(6);
    expect(await statuses('budget_fetcher')).toEqual([
      { status: 'done', n: counts.claimed },
      { status: 'queued', n: 30 - counts.claimed },
    ]);
  });

  it('the CPU budget (elapsed time, counted on the invocation clock) stops claiming at the budget, not before', async () => {
    await enqueueBatch(h.sql, Array.from({ length: 10 }, (_, n) => ({ type: 'budget_slow', payload: { n } })));
    pinned = 0;
    const usage = new InvocationUsage({ cpuMs: 3_000, subrequests: 9_000, connections: 6 }, () => pinned);
    const inv = await invocationWith(usage, slow, 1);
    const counts = await withUsage(usage, async () => {
      try {
        return await drain(inv, 30_000);
      } finally {
        await inv.close();
      }
    });
    // one step at a time, each a second: claims at 0, 1 and 2 s; at 3 s the budget is spent
    expect(counts.claimed).toBe(3);
    expect(usage.exhausted()).toEqual({ budget: 'cpu', used: 3_000, limit: 3_000 });
    expect(await statuses('budget_slow')).toEqual([
      { status: 'done', n: 3 },
      { status: 'queued', n: 7 },
    ]);
  });

  it("a dispatcher's alarm that spends a budget re-arms at once, for a fresh invocation with fresh budgets, after fanning out", async () => {
    pinned = 0;
    const usage = new InvocationUsage({ cpuMs: 3_000, subrequests: 9_000, connections: 6 }, () => pinned);
    const inv = await invocationWith(usage, slow, 1);
    const woken: number[] = [];
    const before = Date.now();
    const result = await withUsage(usage, async () => {
      try {
        return await drainForAlarm(inv, 0, async (shard) => void woken.push(shard));
      } finally {
        await inv.close();
      }
    });
    expect(result.report.stoppedBy).toBe('cpu');
    expect(result.counts.claimed).toBe(3);
    expect(result.nextAt).toBeGreaterThanOrEqual(before);
    expect(result.nextAt! - Date.now()).toBeLessThanOrEqual(0);
    // 7 due, one step at a time per invocation: every other shard of the 4 was woken, once
    expect(woken.sort()).toEqual([1, 2, 3]);
    expect(await statuses('budget_slow')).toEqual([{ status: 'done', n: 6 }, { status: 'queued', n: 4 }]);
  });
});

describe('a failed alarm', () => {
  it('is tried again after 1 s, doubling to a minute', () => {
    expect([1, 2, 3, 6, 7, 8, 50].map(retryAfterFailureMs)).toEqual([1_000, 2_000, 4_000, 32_000, 60_000, 60_000, 60_000]);
  });
});
