// Postgres matrix: the claim; parked rows (run_at 'infinity'), which 15 and 16 subtract differently.
import { beforeAll, describe, expect, it } from 'vitest';
import { alertUnclaimedJobs, cancelJob, claimJobs, enqueue, ValidationError } from '../../queue/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';

// A job that is due and that no claim takes does not wait silently: unclaimed_jobs alerts.

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});

const T0 = new Date('2031-07-01T09:00:00Z');
const min = (m: number) => new Date(T0.getTime() + m * 60_000);

async function clear() {
  await db.sql`update worker.jobs set status = 'cancelled', finished_at = ${T0}, locked_until = null where status in ('queued', 'running')`;
  await db.sql`delete from worker.alerts`;
}

async function openAlerts() {
  return db.sql`select key, job_id, detail, occurrences from worker.alerts where kind = 'unclaimed_jobs' and resolved_at is null order by key`;
}

describe('unclaimed_jobs alerts', () => {
  it('opens one alert per type and pool after the threshold, refreshes it, and resolves it once the jobs are claimed', async () => {
    await clear();
    const { job: first } = await enqueue(db.sql, { type: 'countdown', payload: { n: 1 } }, { now: T0 });
    await enqueue(db.sql, { type: 'uppercase', payload: { text: 'eu' }, pool: 'eu' }, { now: T0 });

    expect(await alertUnclaimedJobs(db.sql, { now: min(14) })).toEqual({ opened: 0, refreshed: 0, resolved: 0 });
    expect(await alertUnclaimedJobs(db.sql, { now: min(16) })).toEqual({ opened: 2, refreshed: 0, resolved: 0 });
    let open = await openAlerts();
    expect(open.map((a) => a.key)).toEqual(['countdown', 'uppercase:eu']);
    expect(open[0]!.job_id).toBe(first.id);
    expect(open[0]!.detail).toMatchObject({ type: 'countdown', pool: null, count: 1, oldest: first.id, thresholdMs: 900_000 });
    expect(open[1]!.detail).toMatchObject({ type: 'uppercase', pool: 'eu', count: 1 });
    const [row] = await db.sql`select message from worker.alerts where key = 'uppercase:eu'`;
    expect(row!.message).toMatch(/^1 uppercase job\(s\) in pool eu due and unclaimed for more than 15 min/);

    // more jobs of the type: still one alert, its count brought up to date
    await enqueue(db.sql, { type: 'countdown', payload: { n: 2 } }, { now: min(1) });
    expect(await alertUnclaimedJobs(db.sql, { now: min(17) })).toEqual({ opened: 0, refreshed: 2, resolved: 0 });
    open = await openAlerts();
    expect(open).toHaveLength(2);
    expect(open[0]!).toMatchObject({ key: 'countdown', occurrences: 2 });
    expect(open[0]!.detail).toMatchObject({ count: 2, oldest: first.id });

    // one claimed: the other still waits, the alert stays (and now names the other)
    const [claimed] = await claimJobs(db.sql, { workerId: 'late', limit: 1, now: min(18), types: ['countdown'] });
    expect(claimed!.id).toBe(first.id);
    expect(await alertUnclaimedJobs(db.sql, { now: min(18) })).toEqual({ opened: 0, refreshed: 2, resolved: 0 });
    expect((await openAlerts())[0]!.detail).toMatchObject({ count: 1 });
    expect((await openAlerts())[0]!.job_id).not.toBe(first.id);

    // all claimed: resolved; the pool's alert stays open
    await claimJobs(db.sql, { workerId: 'late', limit: 5, now: min(19), types: ['countdown'] });
    expect(await alertUnclaimedJobs(db.sql, { now: min(19) })).toEqual({ opened: 0, refreshed: 1, resolved: 1 });
    expect((await openAlerts()).map((a) => a.key)).toEqual(['uppercase:eu']);
  });

  it('resolves when the jobs end, and opens anew if jobs strand again', async () => {
    await clear();
    const { job } = await enqueue(db.sql, { type: 'uppercase', payload: { text: 'gone' }, pool: 'nowhere' }, { now: T0 });
    expect((await alertUnclaimedJobs(db.sql, { now: min(30) })).opened).toBe(1);
    await cancelJob(db.sql, job.id, 'no such pool', { now: min(31) });
    expect(await alertUnclaimedJobs(db.sql, { now: min(32) })).toEqual({ opened: 0, refreshed: 0, resolved: 1 });
    expect(await openAlerts()).toHaveLength(0);

    await enqueue(db.sql, { type: 'uppercase', payload: { text: 'again' }, pool: 'nowhere' }, { now: min(40) });
    expect(await alertUnclaimedJobs(db.sql, { now: min(56) })).toEqual({ opened: 1, refreshed: 0, resolved: 0 });
    const [counts] = await db.sql`select count(*)::int as n from worker.alerts where key = 'uppercase:nowhere'`;
    expect(counts!.n).toBe(2); // the resolved one and the new one
  });

  it('leaves out jobs that wait by design: a full concurrency key, a dedupe key with an active job, a parked job', async () => {
    await clear();
    await enqueue(db.sql, { type: 'uppercase', payload: { text: 'k1' }, concurrencyKey: 'acct:1', concurrencyLimit: 1 }, { now: T0 });
    await enqueue(db.sql, { type: 'uppercase', payload: { text: 'd1' }, dedupeKey: 'deploy:1' }, { now: T0 });
    const running = await claimJobs(db.sql, { workerId: 'long', limit: 10, now: T0 });
    expect(running).toHaveLength(2);
    await db.sql`update worker.jobs set locked_until = ${min(600)} where id = any (${running.map((j) => j.id)}::uuid[])`;
    await enqueue(db.sql, { type: 'uppercase', payload: { text: 'k2' }, concurrencyKey: 'acct:1', concurrencyLimit: 1 }, { now: T0 });
    await enqueue(db.sql, { type: 'uppercase', payload: { text: 'd2' }, dedupeKey: 'deploy:1' }, { now: T0 });
    await db.sql`insert into worker.jobs (type, payload, run_at, created_at) values ('uppercase', '{"text":"parked"}', 'infinity', ${T0})`;
    expect(await alertUnclaimedJobs(db.sql, { now: min(120) })).toEqual({ opened: 0, refreshed: 0, resolved: 0 });

    // once the key has room again, its waiting job counts
    await db.sql`update worker.jobs set status = 'done', finished_at = ${min(121)}, locked_until = null
                  where id = any (${running.map((j) => j.id)}::uuid[]) and concurrency_key is not null`;
    expect((await alertUnclaimedJobs(db.sql, { now: min(122) })).opened).toBe(1);
    expect((await openAlerts())[0]!.detail).toMatchObject({ type: 'uppercase', count: 1 });
  });

  it('a bounded pass never resolves a group it did not read', async () => {
    await clear();
    for (const pool of ['a', 'b', 'c']) await enqueue(db.sql, { type: 'uppercase', payload: { text: pool }, pool }, { now: T0 });
    expect((await alertUnclaimedJobs(db.sql, { now: min(20) })).opened).toBe(3);
    expect(await alertUnclaimedJobs(db.sql, { now: min(21), limit: 1 })).toEqual({ opened: 0, refreshed: 1, resolved: 0 });
    expect(await openAlerts()).toHaveLength(3);
  });

  it('refuses a bad threshold or limit, naming the field', async () => {
    await expect(alertUnclaimedJobs(db.sql, { thresholdMs: -1 })).rejects.toMatchObject({ field: 'thresholdMs' });
    await expect(alertUnclaimedJobs(db.sql, { limit: 0 })).rejects.toBeInstanceOf(ValidationError);
  });
});
