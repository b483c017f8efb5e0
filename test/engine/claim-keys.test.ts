// Postgres matrix: the claim (concurrency keys, held exactly under concurrent claims).
import { beforeAll, describe, expect, it } from 'vitest';
import { claimJobs, enqueueBatch, type EnqueueInput, type Job } from '../../queue/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';

// A key at its limit never blocks other keys' jobs behind it, however many keys are full.

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});

const now = new Date('2031-03-01T12:00:00Z');

async function clearQueue() {
  await db.sql`update worker.jobs set status = 'cancelled', finished_at = now(), locked_until = null where status in ('queued', 'running')`;
}

/** `perKey` jobs of each key, enqueued key by key (so each key's backlog is contiguous in claim order). */
function keyed(keys: number, perKey: number, limitOf: (k: number) => number, prefix: string): EnqueueInput[] {
  return Array.from({ length: keys }, (_, k) =>
    Array.from({ length: perKey }, (_, i) => ({
      type: 'uppercase', payload: { text: `${prefix}${k}-${i}` },
      concurrencyKey: `${prefix}${String(k).padStart(3, '0')}`, concurrencyLimit: limitOf(k),
    }))).flat();
}

function keyless(n: number, prefix: string): EnqueueInput[] {
  return Array.from({ length: n }, (_, i) => ({ type: 'uppercase', payload: { text: `${prefix}${i}` } }));
}

/** Start the oldest queued job of each listed key, as if a runner held it (lease an hour out). */
async function startOnePer(keys: string[]) {
  await db.sql`
    update worker.jobs j set status = 'running', attempts = 1, locked_by = 'elsewhere', lease_token = gen_random_uuid(),
           locked_until = ${now}::timestamptz + interval '1 hour', claimed_at = ${now}, started_at = ${now}
     where j.id in (select distinct on (concurrency_key) id from worker.jobs
                     where status = 'queued' and concurrency_key = any (${keys}::text[])
                     order by concurrency_key, priority, run_at, id)`;
}

/** What a claim could take now, computed from the rows (the model): room per key plus keyless jobs. */
async function claimable(): Promise<number> {
  const [row] = await db.sql`
    with k as (
      select concurrency_key as key, min(concurrency_limit) as lim,
             count(*) filter (where status = 'queued') as queued,
             count(*) filter (where status = 'running') as running
        from worker.jobs where concurrency_key is not null and status in ('queued', 'running') group by 1)
    select (select coalesce(sum(greatest(0, least(queued, lim - running))), 0) from k)
         + (select count(*) from worker.jobs where status = 'queued' and concurrency_key is null) as n`;
  return Number(row!.n);
}

async function overLimit() {
  return db.sql`
    select concurrency_key, count(*)::int as running, min(concurrency_limit) as lim from worker.jobs
     where status = 'running' and concurrency_key is not null group by 1 having count(*) > min(concurrency_limit)`;
}

describe('claims look past full concurrency keys', () => {
  it('6 keys of 20 jobs (limit 1) and 3 keyless jobs: one claim of 10 takes all 9 claimable', async () => {
    await clearQueue();
    await enqueueBatch(db.sql, [...keyed(6, 20, () => 1, 'six'), ...keyless(3, 'free')], { now });
    const first = await claimJobs(db.sql, { workerId: 'c', limit: 10, now });
    expect(first).toHaveLength(9);
    expect(new Set(first.map((j) => j.concurrencyKey)).size).toBe(7); // six keys and null
    expect(first.filter((j) => j.concurrencyKey === null)).toHaveLength(3);
    expect(await claimJobs(db.sql, { workerId: 'c', limit: 10, now })).toHaveLength(0);
    expect(await overLimit()).toHaveLength(0);
  });

  it('with 50 keys at their limit, every claim returns min(limit, claimable)', async () => {
    await clearQueue();
    await enqueueBatch(db.sql, [...keyed(50, 10, () => 1, 'full'), ...keyless(25, 'behind')], { now });
    await startOnePer(Array.from({ length: 50 }, (_, k) => `full${String(k).padStart(3, '0')}`));
    expect(await claimable()).toBe(25);
    const sizes: number[] = [];
    for (let i = 0; i < 4; i++) {
      const expected = Math.min(10, await claimable());
      const jobs = await claimJobs(db.sql, { workerId: 'c', limit: 10, now });
      expect(jobs.every((j) => j.concurrencyKey === null)).toBe(true);
      expect(jobs).toHaveLength(expected);
      sizes.push(jobs.length);
    }
    expect(sizes).toEqual([10, 10, 5, 0]);

    // once the running jobs end, each key has room for one again: all 50 in one claim
    await db.sql`update worker.jobs set status = 'done', finished_at = ${now}, locked_until = null where locked_by = 'elsewhere'`;
    const next = await claimJobs(db.sql, { workerId: 'c', limit: 100, now });
    expect(next).toHaveLength(50);
    expect(new Set(next.map((j) => j.concurrencyKey)).size).toBe(50);
  });

  it('a key with room for some jobs gives exactly that many, and its backlog does not fill the claim', async () => {
    await clearQueue();
    // key room3: limit 3 with one running; then 40 jobs of key big (limit 2); then keyless
    await enqueueBatch(db.sql, [...keyed(1, 10, () => 3, 'room'), ...keyed(1, 40, () => 2, 'big'), ...keyless(4, 'tail')], { now });
    await startOnePer(['room000']);
    const jobs = await claimJobs(db.sql, { workerId: 'c', limit: 20, now });
    const count = (key: string | null) => jobs.filter((j) => j.concurrencyKey === key).length;
    expect([count('room000'), count('big000'), count(null)]).toEqual([2, 2, 4]);
  });

  it('20 concurrent claimers over 50 keys never exceed a limit; claims in sequence then take exactly what is claimable', async () => {
    await clearQueue();
    const limitOf = (k: number) => (k % 3) + 1;
    await enqueueBatch(db.sql, [...keyed(50, 8, limitOf, 'conc'), ...keyless(30, 'conc-free')], { now });
    await startOnePer(Array.from({ length: 50 }, (_, k) => k).filter((k) => k % 3 === 0).map((k) => `conc${String(k).padStart(3, '0')}`));
    const before = await claimable();
    expect(before).toBe(30 + 17 * 2 + 16 * 3); // keyless; 17 keys of limit 1 are full; 17 of limit 2, 16 of limit 3

    const clients = Array.from({ length: 20 }, () => db.client(1));
    const claims = await Promise.all(clients.map((sql, i) => claimJobs(sql, { workerId: `claimer-${i}`, limit: 5, now })));
    const claimed: Job[] = claims.flat();
    expect(new Set(claimed.map((j) => j.id)).size).toBe(claimed.length);
    expect(claimed.length).toBeLessThanOrEqual(100);
    expect(claimed.length).toBeGreaterThan(0);
    expect(await overLimit()).toHaveLength(0);
    expect(await claimable()).toBe(before - claimed.length);

    for (let round = 0; ; round++) {
      const expected = Math.min(7, await claimable());
      const jobs = await claimJobs(db.sql, { workerId: 'seq', limit: 7, now });
      expect(jobs).toHaveLength(expected);
      expect(await overLimit()).toHaveLength(0);
      if (jobs.length === 0) break;
      expect(round).toBeLessThan(50);
    }
    expect(await claimable()).toBe(0);
    const [row] = await db.sql`select count(*)::int as n from worker.jobs where status = 'running' and locked_by <> 'elsewhere'`;
    expect(row!.n).toBe(before);
  });
});
