// Postgres matrix: limits at and past their edges.
import { beforeAll, describe, expect, it } from 'vitest';
import { claimJobs, completeJob, enqueue, enqueueBatch, getJob, type Job } from '../../queue/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});

async function clearQueue() {
  await db.sql`update worker.jobs set status = 'cancelled', finished_at = now() where status in ('queued', 'running')`;
}

/** 20 claimers on their own connections, all at once, each asking for `limit` jobs. */
async function claimConcurrently(pool: string | null, limit: number): Promise<Job[]> {
  const clients = Array.from({ length: 20 }, () => db.client(1));
  const claims = await Promise.all(clients.map((sql, i) => claimJobs(sql, { workerId: `claimer-${i}`, pool, limit })));
  return claims.flat();
}

describe('routing and limits', () => {
  it('a runner claims its own pool and unrouted rows, never another pool', async () => {
    await clearQueue();
    await enqueue(db.sql, { type: 'uppercase', payload: { text: 'eu' }, pool: 'eu' });
    await enqueue(db.sql, { type: 'uppercase', payload: { text: 'us' }, pool: 'us' });
    await enqueue(db.sql, { type: 'uppercase', payload: { text: 'any' } });
    const eu = await claimJobs(db.sql, { workerId: 'eu-1', pool: 'eu', limit: 10 });
    expect(eu.map((j) => j.payload.text).sort()).toEqual(['any', 'eu']);
    expect(eu.every((j) => j.runningPool === 'eu')).toBe(true);
    const unrouted = await claimJobs(db.sql, { workerId: 'none', pool: null, limit: 10 });
    expect(unrouted).toHaveLength(0);
  });

  it('holds a pool capacity (weighted by class) exactly under 20 concurrent claimers', async () => {
    await clearQueue();
    await db.sql`insert into worker.pool_capacity (pool, enabled, max_running_weight) values ('cap', true, 30)`;
    // 40 light (cost 3, their GB) and 10 heavy (cost 8) jobs, heavy first: 3 heavy and 2 light fill 30 exactly
    await enqueueBatch(db.sql, [
      ...Array.from({ length: 40 }, (_, i) => ({ type: 'uppercase', payload: { text: `l${i}` }, pool: 'cap' })),
      ...Array.from({ length: 10 }, (_, i) => ({ type: 'uppercase', payload: { text: `h${i}` }, pool: 'cap', weight: 'heavy', priority: 10 })),
    ]);
    const claimed = await claimConcurrently('cap', 3);
    const [row] = await db.sql`
      select coalesce(sum(w.cost), 0)::int as weight from worker.jobs j join worker.weight_classes w on w.name = j.weight
       where j.status = 'running' and j.running_pool = 'cap'`;
    expect(row!.weight).toBe(30);
    expect(claimed.reduce((n, j) => n + (j.weight === 'heavy' ? 8 : 3), 0)).toBe(30);
    expect(claimed.filter((j) => j.weight === 'heavy')).toHaveLength(3);

    // freeing capacity admits more; a disabled pool claims nothing
    await completeJob(db.sql, claimed[0]!, null);
    expect((await claimJobs(db.sql, { workerId: 'x', pool: 'cap', limit: 10 })).length).toBeGreaterThan(0);
    await db.sql`update worker.pool_capacity set enabled = false where pool = 'cap'`;
    await db.sql`update worker.pool_capacity set max_running_weight = 1000 where pool = 'cap'`;
    expect(await claimJobs(db.sql, { workerId: 'x', pool: 'cap', limit: 10 })).toHaveLength(0);
  });

  it('holds per-key concurrency limits exactly under 20 concurrent claimers', async () => {
    await clearQueue();
    await enqueueBatch(db.sql, [
      ...Array.from({ length: 30 }, (_, i) => ({ type: 'uppercase', payload: { text: `a${i}` }, concurrencyKey: 'account:a', concurrencyLimit: 2 })),
      ...Array.from({ length: 30 }, (_, i) => ({ type: 'uppercase', payload: { text: `b${i}` }, concurrencyKey: 'account:b', concurrencyLimit: 3 })),
      ...Array.from({ length: 5 }, (_, i) => ({ type: 'uppercase', payload: { text: `free${i}` }, priority: 90 })),
    ]);
    const claimed = await claimConcurrently(null, 4);
    const byKey = (k: string) => claimed.filter((j) => j.concurrencyKey === k).length;
    expect(byKey('account:a')).toBe(2);
    expect(byKey('account:b')).toBe(3);
    expect(claimed.filter((j) => j.concurrencyKey === null)).toHaveLength(5);
    const rows = await db.sql`select concurrency_key, count(*)::int as n from worker.jobs where status = 'running' group by 1 order by 1`;
    expect(rows.map((r) => [r.concurrency_key, r.n])).toEqual([['account:a', 2], ['account:b', 3], [null, 5]]);
  });

  it('runs at most one job per dedupe key: a new push waits behind the active one', async () => {
    await clearQueue();
    const first = await enqueue(db.sql, { type: 'countdown', payload: { n: 2 }, dedupeKey: 'deploy:s:main' });
    const [active] = await claimJobs(db.sql, { workerId: 'w', limit: 10 });
    expect(active!.id).toBe(first.job.id);
    const second = await enqueue(db.sql, { type: 'countdown', payload: { n: 1 }, dedupeKey: 'deploy:s:main' });
    expect(second.superseded).toBeNull();
    expect(await claimConcurrently(null, 5)).toHaveLength(0);
    // between steps the first job is still active: the second still waits, and is not superseded
    const { continueJob } = await import('../../queue/index.ts');
    await continueJob(db.sql, active!, { step: 'count', checkpoint: { taken: 1 } });
    const third = await enqueue(db.sql, { type: 'countdown', payload: { n: 3 }, dedupeKey: 'deploy:s:main' });
    expect(third.superseded).toBe(second.job.id);
    const [again] = await claimJobs(db.sql, { workerId: 'w', limit: 10 });
    expect(again!.id).toBe(first.job.id);
    await completeJob(db.sql, again!, null);
    const [next] = await claimJobs(db.sql, { workerId: 'w', limit: 10 });
    expect(next!.id).toBe(third.job.id);
    expect((await getJob(db.sql, first.job.id))!.job.status).toBe('done');
  });
});
