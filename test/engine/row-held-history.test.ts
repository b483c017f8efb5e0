import { beforeAll, describe, expect, it } from 'vitest';
import {
  claimJobs, completeJob, continueJob, enqueue, enqueueBatch, failJob, getJob, pruneFinished, releaseOwnLease, rescheduleJob,
  rescueExpiredLeases, retryJob, type Job,
} from '../../queue/index.ts';
import { checkHistory } from '../../scripts/lib/history.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';

/**
 * 0160: the happy path's claimed and done events are held on the job row; worker.job_history
 * presents them with the event rows as one history, under the ids they took when they happened.
 */
let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
  await db.sql`insert into worker.job_types (type, lease_ms, max_attempts) values ('held_probe', 30000, 2), ('held_batch', 30000, 2) on conflict do nothing`;
});

const T0 = new Date('2026-11-02T08:00:00Z');
const at = (ms: number) => new Date(T0.getTime() + ms);

interface Row {
  id: number;
  at: Date;
  kind: string;
  detail: Record<string, unknown>;
}
const history = async (jobId: string): Promise<Row[]> =>
  (await db.sql<Row[]>`select id::int, at, kind, detail from worker.job_history where job_id = ${jobId} order by id`).map((r) => ({ ...r }));
const eventRows = async (jobId: string): Promise<string[]> =>
  (await db.sql<{ kind: string }[]>`select kind from worker.job_events where job_id = ${jobId} order by id`).map((r) => r.kind);

async function claim(now: Date, type = 'held_probe'): Promise<Job> {
  const [job] = await claimJobs(db.sql, { workerId: 'held-w', limit: 1, types: [type], now });
  if (!job) throw new Error('nothing claimed');
  return job;
}

/** The claimed event as the claim wrote it before 0160. */
const claimedDetail = (job: Job) => ({
  owner: job.lockedBy, token: job.leaseToken, attempt: job.attempts, step: job.step, lockedUntil: job.lockedUntil!.toISOString(),
});
const normalTimes = (rows: Row[]) => rows.map((r) => ({
  ...r, detail: typeof r.detail.runAt === 'string' ? { ...r.detail, runAt: new Date(r.detail.runAt).toISOString() } : r.detail,
}));
const normal = (rows: Row[]) => rows.map((r) => ({
  ...r, detail: typeof r.detail.lockedUntil === 'string' ? { ...r.detail, lockedUntil: new Date(r.detail.lockedUntil).toISOString() } : r.detail,
}));

describe('the history the job row holds', () => {
  it('the happy path writes one event row; the history reads enqueued, claimed and done as the claim and completion wrote them', async () => {
    const { job } = await enqueue(db.sql, { type: 'held_probe', payload: {} }, { now: at(0) });
    const claimed = await claim(at(1000));
    expect(claimed.id).toBe(job.id);
    expect(await completeJob(db.sql, claimed, { ok: true }, { now: at(1500) })).toBe(true);

    expect(await eventRows(job.id)).toEqual(['enqueued']);
    const rows = normal(await history(job.id));
    expect(rows.map((r) => r.kind)).toEqual(['enqueued', 'claimed', 'done']);
    expect(rows[1]).toMatchObject({ at: at(1000), detail: claimedDetail(claimed) });
    expect(rows[2]).toMatchObject({ at: at(1500), detail: { attempt: 1 } });
    expect(rows[0]!.id < rows[1]!.id && rows[1]!.id < rows[2]!.id).toBe(true);
    // the API reads the same history
    const got = await getJob(db.sql, job.id);
    expect(got!.events.map((e) => [e.id, e.kind, e.at.getTime()])).toEqual(rows.map((r) => [r.id, r.kind, r.at.getTime()]));
  });

  it('a claim that ends another way is written out under the id it took, with the step and attempt it ran', async () => {
    const { job } = await enqueue(db.sql, { type: 'held_probe', payload: {} }, { now: at(10_000) });
    const first = await claim(at(11_000));
    const whileRunning = await history(job.id);
    expect(whileRunning.map((r) => r.kind)).toEqual(['enqueued', 'claimed']);
    expect(await eventRows(job.id)).toEqual(['enqueued']);

    // continue: the row's step, attempts and lease change; the claim is written out first
    expect(await continueJob(db.sql, first, { step: 'two', delayMs: 0 }, { now: at(12_000) })).toBe(true);
    expect(await eventRows(job.id)).toEqual(['enqueued', 'claimed', 'checkpoint']);
    const afterContinue = await history(job.id);
    expect(afterContinue.slice(0, 2)).toEqual(whileRunning);
    expect(normal(afterContinue)[1]!.detail).toEqual(claimedDetail(first));

    // retry, then failure on the last attempt: each claim precedes its ending
    const second = await claim(at(13_000));
    expect(await retryJob(db.sql, second, 'flaky', 0, { now: at(14_000) })).toBe('queued');
    const third = await claim(at(15_000));
    expect(await failJob(db.sql, third, 'broken', { now: at(16_000) })).toBe(true);

    const rows = normal(await history(job.id));
    expect(rows.map((r) => r.kind)).toEqual(['enqueued', 'claimed', 'checkpoint', 'claimed', 'retry', 'claimed', 'failed']);
    expect(rows.filter((r) => r.kind === 'claimed').map((r) => r.detail)).toEqual([first, second, third].map(claimedDetail));
    expect(rows.map((r) => r.at.getTime())).toEqual([10_000, 11_000, 12_000, 13_000, 14_000, 15_000, 16_000].map((ms) => at(ms).getTime()));
    // every event is a row now: the failed row holds none
    expect(await eventRows(job.id)).toEqual(rows.map((r) => r.kind));
  });

  it('lease expiry and the owner releasing its lease write the claim out before their own event', async () => {
    const { job } = await enqueue(db.sql, { type: 'held_probe', payload: {}, maxAttempts: 3 }, { now: at(20_000) });
    const first = await claim(at(21_000));
    expect(await releaseOwnLease(db.sql, first, 'shutting down', { now: at(22_000) })).toBe(true);
    const second = await claim(at(23_000));
    await rescueExpiredLeases(db.sql, { now: at(23_000 + 31_000) });
    const rows = await history(job.id);
    expect(rows.map((r) => r.kind)).toEqual(['enqueued', 'claimed', 'lease_released', 'claimed', 'lease_expired', 'escalated']);
    expect(normal(rows).filter((r) => r.kind === 'claimed').map((r) => r.detail)).toEqual([first, second].map(claimedDetail));
    const report = await checkHistory(db.sql, { type: 'held_probe' });
    expect(report.problems).toEqual([]);
  });

  it('a done row leaving done by any statement writes its claim and done event out first: the history is unchanged', async () => {
    const { job } = await enqueue(db.sql, { type: 'held_probe', payload: {} }, { now: at(30_000) });
    expect(await completeJob(db.sql, await claim(at(31_000)), null, { now: at(32_000) })).toBe(true);
    const before = await history(job.id);
    await db.sql`update worker.jobs set status = 'queued', finished_at = null, result = null where id = ${job.id}`;
    expect(await history(job.id)).toEqual(before);
    expect(await eventRows(job.id)).toEqual(['enqueued', 'claimed', 'done']);
    // set back to done by hand and away again: still one of each, nothing written twice
    await db.sql`update worker.jobs set status = 'done', finished_at = ${at(32_000)}, result = 'null' where id = ${job.id}`;
    expect(await history(job.id)).toEqual(before);
    await db.sql`update worker.jobs set status = 'queued', finished_at = null, result = null where id = ${job.id}`;
    expect(await history(job.id)).toEqual(before);
    expect(await eventRows(job.id)).toEqual(['enqueued', 'claimed', 'done']);
    // and run again, it is a second claim and a second done, after them
    const again = await claim(at(33_000));
    expect(await completeJob(db.sql, again, null, { now: at(34_000) })).toBe(true);
    const rows = await history(job.id);
    expect(rows.slice(0, 3)).toEqual(before);
    expect(rows.slice(3).map((r) => r.kind)).toEqual(['claimed', 'done']);
  });

  it('a batch enqueue writes no event row: the row holds its enqueued event until its run_at changes', async () => {
    const [a, b] = await enqueueBatch(db.sql, [
      { type: 'held_batch', payload: { n: 1 } },
      { type: 'held_batch', payload: { n: 2 }, runAt: at(70_000) },
    ], { now: at(60_000) });
    expect(await eventRows(a!.job.id)).toEqual([]);
    const enqueued = { kind: 'enqueued', at: at(60_000), detail: { batch: true, runAt: at(60_000).toISOString() } };
    expect(normalTimes(await history(a!.job.id))).toEqual([{ id: expect.any(Number), ...enqueued }]);
    // one step and done: still nothing written as a row
    const first = await claim(at(61_000), 'held_batch');
    expect(first.id).toBe(a!.job.id);
    expect(await completeJob(db.sql, first, null, { now: at(62_000) })).toBe(true);
    expect(await eventRows(a!.job.id)).toEqual([]);
    expect((await history(a!.job.id)).map((r) => r.kind)).toEqual(['enqueued', 'claimed', 'done']);
    // a reschedule moves run_at: the enqueued event is written out with the run_at it was enqueued with
    const before = await history(b!.job.id);
    await rescheduleJob(db.sql, b!.job.id, at(90_000), { now: at(63_000) });
    expect(await eventRows(b!.job.id)).toEqual(['enqueued', 'rescheduled']);
    const rows = await history(b!.job.id);
    expect(rows[0]).toEqual(before[0]);
    expect(normalTimes(rows)[0]!.detail).toEqual({ batch: true, runAt: at(70_000).toISOString() });
  });

  it('event retention reaches the events a row holds: a pruned history keeps a suffix, never a hole', async () => {
    await db.sql`insert into worker.job_types (type, lease_ms) values ('held_retained', 30000) on conflict do nothing`;
    const [old] = await enqueueBatch(db.sql, [{ type: 'held_retained', payload: {} }], { now: at(100_000) });
    const first = await claim(at(101_000), 'held_retained');
    expect(await continueJob(db.sql, first, { step: 'two', delayMs: 0 }, { now: at(102_000) })).toBe(true);
    const second = await claim(at(200_000), 'held_retained');
    expect(await completeJob(db.sql, second, null, { now: at(201_000) })).toBe(true);
    // events before 150 s are pruned: the enqueued one the row held goes with the first claim and its checkpoint
    await pruneFinished(db.sql, { eventRetentionMs: 50_000, finishedRetentionMs: 1e9, failedRetentionMs: 1e9, now: at(200_000) });
    expect((await history(old!.job.id)).map((r) => r.kind)).toEqual(['claimed', 'done']);
    // set back by hand, the row writes out only what retention kept
    await db.sql`update worker.jobs set status = 'queued', finished_at = null, result = null, run_at = ${at(300_000)} where id = ${old!.job.id}`;
    expect(await eventRows(old!.job.id)).toEqual(['claimed', 'done']);
    // and past every event, the job keeps its row and no history
    await pruneFinished(db.sql, { eventRetentionMs: 0, finishedRetentionMs: 1e9, failedRetentionMs: 1e9, now: at(400_000) });
    expect(await history(old!.job.id)).toEqual([]);
    await db.sql`update worker.event_retention set kept_from = '-infinity'`; // the other tests' clock is earlier
  });

  it('a prune pass that stops short of older event rows hides no row-held event after them', async () => {
    await db.sql`insert into worker.job_types (type, lease_ms) values ('held_partial', 30000) on conflict do nothing`;
    // enqueued, claimed and checkpoint as event rows; the last claim and done held on the row
    const { job } = await enqueue(db.sql, { type: 'held_partial', payload: {} }, { now: at(500_000) });
    const first = await claim(at(501_000), 'held_partial');
    expect(await continueJob(db.sql, first, { step: 'two', delayMs: 0 }, { now: at(502_000) })).toBe(true);
    expect(await completeJob(db.sql, await claim(at(503_000), 'held_partial'), null, { now: at(504_000) })).toBe(true);
    const whole = await history(job.id);
    expect(whole.map((r) => r.kind)).toEqual(['enqueued', 'claimed', 'checkpoint', 'claimed', 'done']);
    await db.sql`delete from worker.job_events where at < ${at(500_000)}`; // only this job's events are old enough
    // a pass of one deletes the enqueued event; the cut is past everything, the claimed and checkpoint rows remain
    await pruneFinished(db.sql, { eventRetentionMs: 0, finishedRetentionMs: 1e9, failedRetentionMs: 1e9, limit: 1, now: at(600_000) });
    expect((await history(job.id)).map((r) => r.kind)).toEqual(['claimed', 'checkpoint', 'claimed', 'done']);
    // the next passes take the rest, the row-held events last
    await pruneFinished(db.sql, { eventRetentionMs: 0, finishedRetentionMs: 1e9, failedRetentionMs: 1e9, limit: 1, now: at(600_000) });
    expect((await history(job.id)).map((r) => r.kind)).toEqual(['checkpoint', 'claimed', 'done']);
    await pruneFinished(db.sql, { eventRetentionMs: 0, finishedRetentionMs: 1e9, failedRetentionMs: 1e9, limit: 1, now: at(600_000) });
    await pruneFinished(db.sql, { eventRetentionMs: 0, finishedRetentionMs: 1e9, failedRetentionMs: 1e9, limit: 1, now: at(600_000) });
    expect(await history(job.id)).toEqual([]);
    await db.sql`update worker.event_retention set kept_from = '-infinity'`; // the other tests' clock is earlier
  });

  it('pruning a job takes the events its row holds with it', async () => {
    const { job } = await enqueue(db.sql, { type: 'held_probe', payload: {} }, { now: at(40_000) });
    expect(await completeJob(db.sql, await claim(at(41_000)), null, { now: at(42_000) })).toBe(true);
    await db.sql`delete from worker.jobs where id = ${job.id}`;
    expect((await history(job.id)).map((r) => r.kind)).toEqual(['enqueued']);
  });
});

describe('fence tokens (one random draw per claim)', () => {
  it('differ between the jobs of one claim and between claims of one job; a stale token settles nothing', async () => {
    for (let i = 0; i < 20; i++) await enqueue(db.sql, { type: 'held_probe', payload: { i } }, { now: at(50_000) });
    const batch = await claimJobs(db.sql, { workerId: 'held-w', limit: 20, types: ['held_probe'], now: at(51_000) });
    expect(batch).toHaveLength(20);
    expect(new Set(batch.map((j) => j.leaseToken)).size).toBe(20);
    const [first] = batch;
    expect(await releaseOwnLease(db.sql, first!, 'again', { now: at(52_000) })).toBe(true);
    const again = await claim(at(53_000));
    expect(again.id).toBe(first!.id);
    expect(again.leaseToken).not.toBe(first!.leaseToken);
    expect(await completeJob(db.sql, first!, null, { now: at(54_000) })).toBe(false);
    expect(await completeJob(db.sql, again, null, { now: at(54_000) })).toBe(true);
    for (const j of batch.slice(1)) expect(await completeJob(db.sql, j, null, { now: at(55_000) })).toBe(true);
  });
});
