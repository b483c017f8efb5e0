// Postgres matrix: claims, settles and bulk batches meeting real deadlocks and serialization failures.
import { z } from 'zod';
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  bulkCancel, connect, defineJobType, done, enqueueBatch, JobRegistry, next, runMaintenance, runSteps, type ClaimRetryLine, type StepLogLine,
} from '../../queue/index.ts';
import { BULK_BATCH_TRIES } from '../../queue/bulk.ts';
import { backoffDelayMs, isContention, isTransientDatabaseError } from '../../queue/database-errors.ts';
import { MAINTENANCE_PASS_TRIES, type MaintenanceRunOptions } from '../../queue/maintenance/scheduler.ts';
import type { MaintenanceConfig } from '../../queue/maintenance/service.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { installFaults, type InjectedFaults } from '../support/faults.ts';

/**
 * Contention is not fatal: a claim, a settle, a bulk batch or a maintenance pass that Postgres
 * aborts with a deadlock (40P01), a serialization failure (40001) or a lock timeout (55P03) wrote
 * nothing, and is run again after a backoff. The errors here are real: a trigger on worker.jobs
 * raises them from the server (test/support/faults.ts).
 */

const T0 = new Date('2032-05-01T09:00:00Z');
/** Short waits between tries: the test counts tries, it does not time them. */
const QUICK = { firstMs: 1, maxMs: 8 };

let db: TestDatabase;
let faults: InjectedFaults;
/** How many times each job's each step ran. */
const runs = new Map<string, number>();
/** Called as each step starts (a test arms its faults here, mid-run). */
let onRun: (() => Promise<void>) | null = null;

const counted = defineJobType({
  type: 'contended_count',
  payload: z.object({ steps: z.number().int() }),
  leaseMs: 60_000,
  maxAttempts: 1, // a step that ran and failed would fail the job: every job done proves no step failed
  async run({ job, payload, checkpoint }) {
    const taken = typeof checkpoint.taken === 'number' ? checkpoint.taken : 0;
    const key = `${job.id}:${taken}`;
    runs.set(key, (runs.get(key) ?? 0) + 1);
    await onRun?.();
    if (taken + 1 >= payload.steps) return done({ steps: payload.steps });
    return next('count', { checkpoint: { taken: taken + 1 } });
  },
});
const registry = new JobRegistry([counted]);

beforeAll(async () => {
  db = await createTestDatabase();
  await registry.sync(db.sql);
  faults = await installFaults(db.sql);
});
beforeEach(async () => {
  await faults.disarm();
  await db.sql`delete from worker.jobs`;
  runs.clear();
  onRun = null;
});

describe('which errors are contention', () => {
  it('deadlock, serialization failure and lock timeout are contention, and transient; a constraint is neither', () => {
    for (const code of ['40P01', '40001', '55P03']) {
      expect(isContention({ code })).toBe(true);
      expect(isTransientDatabaseError({ code })).toBe(true);
    }
    for (const code of ['23505', '22012', 'P0001', 'SB400']) {
      expect(isContention({ code })).toBe(false);
      expect(isTransientDatabaseError({ code })).toBe(false);
    }
    expect(isContention({ code: '57P01' })).toBe(false);
    expect(isTransientDatabaseError({ code: '57P01' })).toBe(true);
  });

  it('backs off exponentially with jitter, capped', () => {
    const backoff = { firstMs: 50, maxMs: 2_000 };
    expect([1, 2, 3, 6, 7, 20].map((n) => backoffDelayMs(n, backoff, () => 1))).toEqual([50, 100, 200, 1_600, 2_000, 2_000]);
    expect([1, 2, 3, 7].map((n) => backoffDelayMs(n, backoff, () => 0))).toEqual([25, 50, 100, 1_000]);
  });
});

describe('a runner meeting contention', () => {
  it('survives 100 injected deadlocks, serialization failures and lock timeouts on claims and settles, and loses no job', async () => {
    const JOBS = 120;
    const STEPS = 3;
    await enqueueBatch(db.sql, Array.from({ length: JOBS }, () => ({ type: 'contended_count', payload: { steps: STEPS } })));
    await faults.arm({ count: 100, every: 2, codes: ['40P01', '40001', '55P03'] });
    const logs: StepLogLine[] = [];
    const warnings: ClaimRetryLine[] = [];
    // two runners on their own connections, on one pinned clock: no lease ever expires, so a step
    // run twice could only be the engine's doing
    const clients = [connect(db.url, { max: 4 }), connect(db.url, { max: 4 })];
    try {
      const counts = await Promise.all(
        clients.map((sql, i) =>
          runSteps({
            sql, registry, workerId: `contended-${i}`, concurrency: 6, clock: () => T0, retryBackoff: QUICK,
            log: (l) => logs.push(l), warn: (w) => warnings.push(w),
          }),
        ),
      );
      expect(await faults.raised()).toBe(100);
      const [row] = await db.sql`select count(*)::int as n, count(*) filter (where status = 'done')::int as done from worker.jobs`;
      expect(row).toEqual({ n: JOBS, done: JOBS });
      // every step of every job ran exactly once
      expect(runs.size).toBe(JOBS * STEPS);
      expect([...runs.values()].every((n) => n === 1)).toBe(true);
      // one done event per job, and no step lost, released or failed
      const [events] = await db.sql`
        select count(*) filter (where kind = 'done')::int as done, count(*) filter (where kind in ('failed', 'lease_expired', 'escalated', 'retry'))::int as bad
          from worker.job_history`;
      expect(events).toEqual({ done: JOBS, bad: 0 });
      expect(logs.filter((l) => l.outcome !== 'done' && l.outcome !== 'continued')).toEqual([]);
      expect(counts.reduce((n, c) => n + c.done, 0)).toBe(JOBS);
      // settles met some of it (the claim's own tries absorb most of what claims meet here; a
      // claim failing past them is the next test's); what reached the loop was logged as contention
      expect(logs.reduce((n, l) => n + (l.settleRetries ?? 0), 0)).toBeGreaterThan(0);
      expect(warnings.every((w) => w.kind === 'contention' && ['40P01', '40001', '55P03'].includes(w.code!))).toBe(true);
    } finally {
      await Promise.all(clients.map((c) => c.end({ timeout: 5 })));
    }
  }, 60_000);

  it('retries a claim that keeps meeting contention for as long as it takes, logging each retry once', async () => {
    await enqueueBatch(db.sql, Array.from({ length: 20 }, () => ({ type: 'contended_count', payload: { steps: 1 } })));
    // the first 60 UPDATE statements all fail: nothing runs yet, so every one is a claim's
    await faults.arm({ count: 60, codes: ['40P01', '40001', '55P03'] });
    const warnings: ClaimRetryLine[] = [];
    const counts = await runSteps({ sql: db.sql, registry, workerId: 'stubborn', concurrency: 5, clock: () => T0, retryBackoff: QUICK, warn: (w) => warnings.push(w) });
    expect(await faults.raised()).toBe(60);
    expect(counts.done).toBe(20);
    // 60 failed tries are 12 claims failing after their own 5 tries each, one line each, counted up
    expect(warnings.map((w) => w.failures)).toEqual(Array.from({ length: 12 }, (_, i) => i + 1));
    expect(warnings.every((w) => w.kind === 'contention')).toBe(true);
    expect([...runs.values()].every((n) => n === 1)).toBe(true);
  });

  it('writes again the completions a failed claim carried: none is lost, none written twice', async () => {
    await enqueueBatch(db.sql, Array.from({ length: 20 }, () => ({ type: 'contended_count', payload: { steps: 1 } })));
    // once the first steps run, the next 40 UPDATE statements all fail: the claim carrying their
    // completions (settle_and_claim rolls back whole), its tries, and the completions each step
    // then writes on its own
    let armed = false;
    onRun = async () => {
      if (armed) return;
      armed = true;
      await faults.arm({ count: 40, codes: ['40P01'] });
    };
    const warnings: ClaimRetryLine[] = [];
    const counts = await runSteps({ sql: db.sql, registry, workerId: 'carried', concurrency: 5, clock: () => T0, retryBackoff: QUICK, warn: (w) => warnings.push(w) });
    expect(await faults.raised()).toBe(40);
    expect(warnings[0]!.completions).toBeGreaterThan(0);
    expect(counts).toMatchObject({ done: 20, lost: 0 });
    const [row] = await db.sql`select count(*) filter (where status = 'done')::int as done from worker.jobs`;
    expect(row!.done).toBe(20);
    const [events] = await db.sql`select count(*)::int as n from worker.job_history where kind = 'done'`;
    expect(events!.n).toBe(20);
    expect([...runs.values()].every((n) => n === 1)).toBe(true);
  });

  it('retries a claim whose connection was cut (57P01) as a blip', async () => {
    await enqueueBatch(db.sql, Array.from({ length: 5 }, () => ({ type: 'contended_count', payload: { steps: 1 } })));
    await faults.arm({ count: 3, codes: ['57P01'] });
    const warnings: ClaimRetryLine[] = [];
    const counts = await runSteps({ sql: db.sql, registry, workerId: 'cut', clock: () => T0, retryBackoff: QUICK, warn: (w) => warnings.push(w) });
    expect(counts.done).toBe(5);
    expect(warnings.map((w) => [w.kind, w.code])).toContainEqual(['connection', '57P01']);
  });

  it('stops with the error once the database has been unreachable for databaseGoneMs', async () => {
    const gone = connect('postgres://postgres@127.0.0.1:1/none', { max: 1 }); // nothing listens on port 1
    const warnings: ClaimRetryLine[] = [];
    try {
      const error = await runSteps({ sql: gone, registry, workerId: 'gone', retryBackoff: QUICK, databaseGoneMs: 200, warn: (w) => warnings.push(w) }).then(
        () => null,
        (e: { code?: string }) => e,
      );
      expect(error?.code).toBe('ECONNREFUSED');
      expect(warnings.length).toBeGreaterThan(0);
      expect(warnings.every((w) => w.kind === 'connection')).toBe(true);
    } finally {
      await gone.end({ timeout: 1 });
    }
  });

  it('stops at once on an error that is not contention, and the job is left for the next claim', async () => {
    await enqueueBatch(db.sql, [{ type: 'contended_count', payload: { steps: 1 } }]);
    await faults.arm({ count: 1, codes: ['P0001'] });
    const warnings: ClaimRetryLine[] = [];
    await expect(runSteps({ sql: db.sql, registry, workerId: 'plain', clock: () => T0, retryBackoff: QUICK, warn: (w) => warnings.push(w) })).rejects.toMatchObject({
      code: 'P0001',
    });
    expect(warnings).toEqual([]);
    await faults.disarm();
    expect((await runSteps({ sql: db.sql, registry, workerId: 'plain', clock: () => T0 })).done).toBe(1);
  });
});

describe('a bulk cancel meeting contention', () => {
  it('runs a batch that met a deadlock again, and cancels everything', async () => {
    await enqueueBatch(db.sql, Array.from({ length: 45 }, () => ({ type: 'contended_count', payload: { steps: 1 } })));
    // the first batch fails three times in a row, later ones now and then
    await faults.arm({ count: 3, codes: ['40P01', '40001', '55P03'] });
    const first = await bulkCancel(db.sql, { type: 'contended_count' }, { batchSize: 10 });
    expect(await faults.raised()).toBe(3);
    expect(first).toMatchObject({ matched: 45, cancelled: 45, skipped: 0, batches: 5, nextCursor: null });
    const [row] = await db.sql`select count(*) filter (where status = 'cancelled')::int as cancelled from worker.jobs`;
    expect(row!.cancelled).toBe(45);
  });

  it(`gives up after ${BULK_BATCH_TRIES} tries of one batch with the contention error; the batches before it stay done`, async () => {
    await enqueueBatch(db.sql, Array.from({ length: 20 }, () => ({ type: 'contended_count', payload: { steps: 1 } })));
    // the first batch goes through, then every try of the second fails
    await bulkCancel(db.sql, { type: 'contended_count' }, { batchSize: 10, maxJobs: 10 });
    await faults.arm({ count: BULK_BATCH_TRIES, codes: ['40P01'] });
    await expect(bulkCancel(db.sql, { type: 'contended_count' }, { batchSize: 10 })).rejects.toMatchObject({ code: '40P01' });
    expect(await faults.raised()).toBe(BULK_BATCH_TRIES);
    const [row] = await db.sql`select count(*) filter (where status = 'cancelled')::int as cancelled from worker.jobs`;
    expect(row!.cancelled).toBe(10);
  }, 30_000);

  it('surfaces an error that is not contention at once', async () => {
    await enqueueBatch(db.sql, Array.from({ length: 5 }, () => ({ type: 'contended_count', payload: { steps: 1 } })));
    await faults.arm({ count: 1, codes: ['P0001'] });
    await expect(bulkCancel(db.sql, { type: 'contended_count' })).rejects.toMatchObject({ code: 'P0001' });
    expect(await faults.raised()).toBe(1);
  });
});

describe('a maintenance pass meeting contention', () => {
  const CONFIG: MaintenanceConfig = {
    cronBackfillMs: 86_400_000, scheduleGraceMs: 3_600_000, stuckJobMs: 7_200_000, unclaimedJobMs: 900_000,
    finishedRetentionMs: 7 * 86_400_000, failedRetentionMs: 30 * 86_400_000, eventRetentionMs: 30 * 86_400_000,
  };
  const options = (log: Array<Record<string, unknown>>): MaintenanceRunOptions => ({
    now: T0, clock: 'pinned', schedules: [], alerts: { send: async () => {} }, config: CONFIG, scrub: (s) => s, log: (l) => void log.push(l),
  });

  it('is run again, and succeeds', async () => {
    const log: Array<Record<string, unknown>> = [];
    await faults.arm({ count: MAINTENANCE_PASS_TRIES - 1, codes: ['40P01'] });
    const run = await runMaintenance(db.sql, options(log));
    expect(run.failed).toEqual([]);
    expect(log.filter((l) => l.msg === 'maintenance pass met contention, retrying')).toHaveLength(MAINTENANCE_PASS_TRIES - 1);
  });

  it(`is logged as failed after ${MAINTENANCE_PASS_TRIES} tries, and the other passes still run`, async () => {
    const log: Array<Record<string, unknown>> = [];
    await faults.arm({ count: MAINTENANCE_PASS_TRIES, codes: ['40P01'] });
    const run = await runMaintenance(db.sql, options(log));
    expect(run.failed).toHaveLength(1);
    expect(log.filter((l) => l.msg === 'maintenance pass failed')).toMatchObject([{ code: '40P01' }]);
  });
});
