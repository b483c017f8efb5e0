// Postgres matrix: the claim (type filters).
import postgres from 'postgres';
import { beforeAll, describe, expect, it } from 'vitest';
import { claimJobs, enqueueBatch, settleAndClaim, type Sql } from '../../queue/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});

async function clearQueue() {
  await db.sql`update worker.jobs set status = 'cancelled', finished_at = now() where status in ('queued', 'running')`;
}

async function enqueueMixed() {
  await enqueueBatch(db.sql, [
    ...Array.from({ length: 3 }, (_, i) => ({ type: 'uppercase', payload: { text: `u${i}` } })),
    // higher priority than the uppercase jobs: a filter must look past them, not stop at them
    ...Array.from({ length: 3 }, (_, i) => ({ type: 'countdown', payload: { n: i + 1 }, priority: 10 })),
  ]);
}

describe('claim type filter', () => {
  it('claims only the listed types; the others stay queued, untouched, for a runner that has them', async () => {
    await clearQueue();
    await enqueueMixed();
    const claimed = await claimJobs(db.sql, { workerId: 'upper-only', limit: 10, types: ['uppercase'] });
    expect(claimed.map((j) => j.type)).toEqual(['uppercase', 'uppercase', 'uppercase']);
    expect(await claimJobs(db.sql, { workerId: 'upper-only', limit: 10, types: ['uppercase'] })).toHaveLength(0);

    const others = await db.sql`
      select j.status, j.attempts, j.last_error,
             (select array_agg(e.kind order by e.id) from worker.job_history e where e.job_id = j.id) as kinds
        from worker.jobs j where j.type = 'countdown' and j.finished_at is null`;
    expect(others).toHaveLength(3);
    for (const row of others) {
      expect(row.status).toBe('queued');
      expect(row.attempts).toBe(0);
      expect(row.last_error).toBeNull();
      expect(row.kinds).toEqual(['enqueued']);
    }
    const [alerts] = await db.sql`select count(*)::int as n from worker.alerts`;
    expect(alerts!.n).toBe(0);

    // a runner with the type (or with no filter) takes them
    const rest = await claimJobs(db.sql, { workerId: 'all', limit: 10 });
    expect(rest.map((j) => j.type)).toEqual(['countdown', 'countdown', 'countdown']);
  });

  it('settle_and_claim filters the same way; an empty list claims nothing', async () => {
    await clearQueue();
    await enqueueMixed();
    expect((await settleAndClaim(db.sql, [], { workerId: 'none', limit: 10, types: [] })).jobs).toHaveLength(0);
    expect(await claimJobs(db.sql, { workerId: 'none', limit: 10, types: [] })).toHaveLength(0);
    const { jobs } = await settleAndClaim(db.sql, [], { workerId: 'count', limit: 10, types: ['countdown', 'not_a_type'] });
    expect(jobs.map((j) => j.type)).toEqual(['countdown', 'countdown', 'countdown']);
    const { jobs: all } = await settleAndClaim(db.sql, [], { workerId: 'all', limit: 10 });
    expect(all.map((j) => j.type)).toEqual(['uppercase', 'uppercase', 'uppercase']);
  });

  it('from SQL: p_types is the last, optional argument of both functions', async () => {
    await clearQueue();
    await enqueueMixed();
    const rows = await db.sql`select type from worker.claim_jobs('sql', null, 10, null, array['countdown'])`;
    expect(rows.map((r) => r.type)).toEqual(['countdown', 'countdown', 'countdown']);
    const [r] = await db.sql`select worker.settle_and_claim('[]'::jsonb, 'sql', null, 10) as r`;
    expect((r!.r as { jobs: unknown[] }).jobs).toHaveLength(3);
    const overloads = await db.sql`
      select proname, pronargs from pg_proc where pronamespace = 'worker'::regnamespace
         and proname in ('claim_jobs', 'settle_and_claim') order by proname`;
    expect(overloads.map((o) => [o.proname, o.pronargs])).toEqual([['claim_jobs', 5], ['settle_and_claim', 6]]);
  });

  it('works on a client that did not fetch the server types (as in the Worker), whatever the names hold', async () => {
    await clearQueue();
    await enqueueMixed();
    const bare = postgres(db.url, { max: 1, fetch_types: false, onnotice: () => {} }) as unknown as Sql;
    try {
      const types = ['we"ird,', 'back\\slash', '{}', 'uppercase'];
      const { jobs } = await settleAndClaim(bare, [], { workerId: 'bare', limit: 10, types });
      expect(jobs.map((j) => j.type)).toEqual(['uppercase', 'uppercase', 'uppercase']);
      expect(await claimJobs(bare, { workerId: 'bare', limit: 10, types: ['countdown'] })).toHaveLength(3);
    } finally {
      await bare.end();
    }
  });
});
