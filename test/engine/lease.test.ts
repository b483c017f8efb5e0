// Postgres matrix: leases and their fence.
import { z } from 'zod';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  claimJobs, completeJob, continueJob, defineJobType, deliverPendingAlerts, done, enqueue, getJob, heartbeat, JobRegistry, next,
  rescueExpiredLeases, retryJob, runSteps, sampleJobTypes, type AlertMessage,
} from '../../queue/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { sampleRunner } from '../support/registry.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});

const T0 = new Date('2026-11-30T12:00:00Z');
const at = (ms: number) => new Date(T0.getTime() + ms);
const LEASE = 120_000;

describe('leases', () => {
  it('reclaims a stale lease once the clock passes it, and counts the attempt', async () => {
    const { job } = await enqueue(db.sql, { type: 'uppercase', payload: { text: 'stale' }, priority: 1 }, { now: T0 });
    const [first] = await claimJobs(db.sql, { workerId: 'crashed', limit: 1, now: at(0) });
    expect(first!.id).toBe(job.id);
    expect(first!.lockedUntil!.getTime()).toBe(at(LEASE).getTime());
    expect(await claimJobs(db.sql, { workerId: 'other', limit: 10, now: at(LEASE - 1) })).toHaveLength(0);

    const [again] = await claimJobs(db.sql, { workerId: 'rescuer', limit: 1, now: at(LEASE + 1) });
    expect(again).toMatchObject({ id: job.id, lockedBy: 'rescuer', attempts: 2, weight: 'heavy', crashes: 1 });
    expect(again!.leaseToken).not.toBe(first!.leaseToken);
    const kinds = (await getJob(db.sql, job.id))!.events.map((e) => e.kind);
    expect(kinds).toEqual(['enqueued', 'claimed', 'lease_expired', 'escalated', 'claimed']);
    expect(await completeJob(db.sql, again!, null)).toBe(true);
  });

  it('a zombie whose lease was taken cannot heartbeat, checkpoint or complete', async () => {
    const { job } = await enqueue(db.sql, { type: 'uppercase', payload: { text: 'zombie' }, priority: 1 }, { now: T0 });
    const [zombie] = await claimJobs(db.sql, { workerId: 'zombie', limit: 1, now: at(0) });
    const [owner] = await claimJobs(db.sql, { workerId: 'owner', limit: 1, now: at(LEASE + 1) });
    expect(owner!.id).toBe(job.id);

    expect((await heartbeat(db.sql, zombie!, { now: at(LEASE + 2) })).owned).toBe(false);
    expect(await continueJob(db.sql, zombie!, { step: 'x' })).toBe(false);
    expect(await completeJob(db.sql, zombie!, { by: 'zombie' })).toBe(false);
    expect(await retryJob(db.sql, zombie!, 'boom', 0)).toBe('lost');

    expect(await completeJob(db.sql, owner!, { by: 'owner' })).toBe(true);
    expect(await completeJob(db.sql, owner!, { by: 'owner twice' })).toBe(false);
    const after = await getJob(db.sql, job.id);
    expect(after!.job).toMatchObject({ status: 'done', result: { by: 'owner' } });
    expect(after!.events.filter((e) => e.kind === 'done')).toHaveLength(1);
  });

  it('escalates light → heavy on a crash, and ends oom_killed (with an alert) after a crash at heavy', async () => {
    const { job } = await enqueue(db.sql, { type: 'uppercase', payload: { text: 'oom' }, priority: 1, maxAttempts: 10 }, { now: T0 });
    await claimJobs(db.sql, { workerId: 'w1', limit: 1, now: at(0) });
    expect(await rescueExpiredLeases(db.sql, { now: at(LEASE + 1) })).toEqual({ requeued: 1, failed: 0, oomKilled: 0 });
    expect((await getJob(db.sql, job.id))!.job).toMatchObject({ status: 'queued', weight: 'heavy' });
    await claimJobs(db.sql, { workerId: 'w2', limit: 1, now: at(LEASE + 2) });
    expect(await rescueExpiredLeases(db.sql, { now: at(2 * LEASE + 3) })).toEqual({ requeued: 0, failed: 0, oomKilled: 1 });
    const after = await getJob(db.sql, job.id);
    expect(after!.job).toMatchObject({ status: 'oom_killed', crashes: 2 });
    expect(after!.job.finishedAt).not.toBeNull();
    expect(after!.events.map((e) => e.kind)).toContain('oom_killed');
    const [alert] = await db.sql`select kind from worker.alerts where job_id = ${job.id}`;
    expect(alert!.kind).toBe('lease_oom');
  });

  it('fails (not requeues) a job whose lease expires on its final attempt', async () => {
    const { job } = await enqueue(db.sql, { type: 'uppercase', payload: { text: 'last' }, priority: 1, maxAttempts: 1 }, { now: T0 });
    await claimJobs(db.sql, { workerId: 'w1', limit: 1, now: at(0) });
    expect(await rescueExpiredLeases(db.sql, { now: at(LEASE + 1) })).toEqual({ requeued: 0, failed: 1, oomKilled: 0 });
    expect((await getJob(db.sql, job.id))!.job.lastError).toMatch(/final attempt/);
  });
});

describe('retries', () => {
  it('retries with backoff until max_attempts, then fails with last_error, an alert row and an Alerts call', async () => {
    const { job } = await enqueue(db.sql, { type: 'fail', payload: { message: 'always broken' }, priority: 1, maxAttempts: 3 }, { now: T0 });
    const sent: AlertMessage[] = [];
    let clock = at(0);
    const runner = sampleRunner(db.sql, { clock: () => clock, alerts: { send: async (a) => void sent.push(a) } });
    const runAt: number[] = [];
    for (let i = 0; i < 3; i++) {
      const counts = await runSteps(runner);
      expect(counts.claimed).toBe(1);
      const { job: j } = (await getJob(db.sql, job.id))!;
      runAt.push(j.runAt.getTime() - clock.getTime());
      clock = new Date(j.runAt.getTime() + 1);
    }
    const after = await getJob(db.sql, job.id);
    expect(after!.job).toMatchObject({ status: 'failed', attempts: 3, lastError: 'always broken' });
    // backoff grows: fail's policy is base 100 ms doubling, with jitter in [d/2, d]
    expect(runAt[0]).toBeGreaterThanOrEqual(50);
    expect(runAt[0]).toBeLessThanOrEqual(100);
    expect(runAt[1]).toBeGreaterThanOrEqual(100);
    expect(runAt[1]).toBeLessThanOrEqual(200);
    expect(after!.events.map((e) => e.kind).filter((k) => k !== 'claimed')).toEqual(['enqueued', 'retry', 'retry', 'failed']);
    const alerts = await db.sql`select kind, notified_at from worker.alerts where job_id = ${job.id}`;
    expect(alerts).toHaveLength(1);
    expect(alerts[0]!.kind).toBe('poison_job');
    expect(alerts[0]!.notified_at).not.toBeNull();
    expect(sent.filter((a) => a.jobId === job.id)).toHaveLength(1);
    expect(sent.find((a) => a.jobId === job.id)!.message).toContain('always broken');
    // delivered once: a second pass sends nothing
    expect(await deliverPendingAlerts(db.sql, runner.alerts!)).toBe(0);
  });
});

describe('claim order', () => {
  it('claims by priority, then run_at, and never before run_at', async () => {
    await db.sql`update worker.jobs set status = 'cancelled', finished_at = now() where status in ('queued', 'running')`;
    const mk = (text: string, priority: number, ms: number) => enqueue(db.sql, { type: 'uppercase', payload: { text }, priority, runAt: at(ms) });
    await mk('low', 100, 0);
    await mk('normal-later', 50, 20);
    await mk('normal-early', 50, 10);
    await mk('urgent', 10, 30);
    await mk('future', 1, 60_000);
    const claimed = await claimJobs(db.sql, { workerId: 'w', limit: 10, now: at(1000) });
    expect(claimed.map((j) => j.payload.text)).toEqual(['urgent', 'normal-early', 'normal-later', 'low']);
  });
});

describe('concurrent runners', () => {
  it('four runners over 2000 jobs: each job runs once, one result each', async () => {
    await db.sql`update worker.jobs set status = 'cancelled', finished_at = now() where status in ('queued', 'running')`;
    const runs = new Map<string, number>();
    const tally = defineJobType({
      type: 'uppercase',
      payload: z.object({ text: z.string() }),
      async run({ job, payload }) {
        runs.set(job.id, (runs.get(job.id) ?? 0) + 1);
        return done({ text: payload.text.toUpperCase() });
      },
    });
    const { enqueueBatch } = await import('../../queue/index.ts');
    for (let i = 0; i < 2; i++) {
      await enqueueBatch(db.sql, Array.from({ length: 1000 }, (_, k) => ({ type: 'uppercase', payload: { text: `c${i}-${k}` } })));
    }
    const registry = new JobRegistry([tally, ...sampleJobTypes.filter((t) => t.type !== 'uppercase')]);
    const results = await Promise.all(
      [0, 1, 2, 3].map((i) => runSteps({ sql: db.client(5), registry, workerId: `runner-${i}`, concurrency: 8 })),
    );
    expect(results.reduce((n, r) => n + r.done, 0)).toBe(2000);
    expect(results.every((r) => r.done > 0)).toBe(true);
    expect(runs.size).toBe(2000);
    expect([...runs.values()].every((n) => n === 1)).toBe(true);
    const [row] = await db.sql`
      select count(*)::int as jobs, count(result)::int as results,
             (select count(*)::int from worker.job_history e where e.kind = 'done' and e.job_id in (select id from worker.jobs where payload->>'text' like 'c%')) as done_events
        from worker.jobs where payload->>'text' like 'c%' and status = 'done'`;
    expect(row).toEqual({ jobs: 2000, results: 2000, done_events: 2000 });
  });
});

describe('retry timing from the error', () => {
  it("uses a thrown error's retryAfterMs (a provider's Retry-After) instead of the backoff", async () => {
    const rateLimited = defineJobType({
      type: 'fail',
      payload: z.object({}),
      async run() {
        throw Object.assign(new Error('429 Too Many Requests'), { retryAfterMs: 7000 });
      },
    });
    const registry = new JobRegistry([rateLimited, ...sampleJobTypes.filter((t) => t.type !== 'fail')]);
    const { job } = await enqueue(db.sql, { type: 'fail', payload: {}, priority: 0, maxAttempts: 5 }, { now: at(0) });
    await runSteps({ sql: db.sql, registry, workerId: 'w', clock: () => at(10) }, { maxJobs: 1 });
    const after = (await getJob(db.sql, job.id))!.job;
    expect(after).toMatchObject({ status: 'queued', lastError: '429 Too Many Requests' });
    expect(after.runAt.getTime()).toBe(at(10 + 7000).getTime());
    await db.sql`update worker.jobs set status = 'cancelled', finished_at = now() where id = ${job.id}`;
  });

  it('a failing cancel hook backs off instead of retrying at once', async () => {
    const stubborn = defineJobType({
      type: 'countdown',
      payload: z.object({ n: z.number() }),
      retry: { baseMs: 4000, maxMs: 4000 },
      async run() {
        return next('wait', { delayMs: 60_000 });
      },
      async onCancel() {
        throw new Error('provider unavailable');
      },
    });
    const registry = new JobRegistry([stubborn, ...sampleJobTypes.filter((t) => t.type !== 'countdown')]);
    const { job } = await enqueue(db.sql, { type: 'countdown', payload: { n: 1 }, priority: 0 }, { now: at(0) });
    await runSteps({ sql: db.sql, registry, workerId: 'w', clock: () => at(10) }, { maxJobs: 1 });
    const { cancelJob } = await import('../../queue/index.ts');
    await cancelJob(db.sql, job.id, 'stop', { now: at(20) });
    await runSteps({ sql: db.sql, registry, workerId: 'w', clock: () => at(30) }, { maxJobs: 1 });
    const after = (await getJob(db.sql, job.id))!.job;
    expect(after).toMatchObject({ status: 'queued', lastError: 'provider unavailable' });
    expect(after.runAt.getTime()).toBeGreaterThanOrEqual(at(30 + 2000).getTime());
    await db.sql`update worker.jobs set status = 'cancelled', finished_at = now() where id = ${job.id}`;
  });
});
