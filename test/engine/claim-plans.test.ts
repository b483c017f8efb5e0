import { beforeAll, describe, expect, it } from 'vitest';
import { claimJobs, completeJobs, enqueueBatch, rescueExpiredLeases, type Sql } from '../../queue/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';

/**
 * The claim, the batch completion and the rescue keep their plans for the session (generic
 * plans), and a session often starts on a queue that looks empty to the statistics. Planned then,
 * they must still walk the indexes once the table has grown: a plan that scans worker.jobs
 * sequentially reads every row on every claim (under a steady load it cost 1 to 4 ms a claim at
 * 20,000 rows).
 */
let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});

async function sequentialScans(sql: Sql): Promise<number> {
  const [row] = await sql`select seq_scan::int as n from pg_stat_user_tables where relid = 'worker.jobs'::regclass`;
  return row!.n as number;
}

describe('plans made on an empty queue', () => {
  it('walk the indexes once the table has grown: no sequential scan of worker.jobs', async () => {
    const runner = db.client(1);
    await db.sql`analyze worker.jobs`; // the statistics of an empty table
    // the session's first claim, completion and rescue: their plans are made now
    const [none] = await claimJobs(runner, { workerId: 'plans', limit: 5 });
    expect(none).toBeUndefined();
    await completeJobs(runner, []);
    await rescueExpiredLeases(runner);

    for (let i = 0; i < 10; i++) {
      await enqueueBatch(db.sql, Array.from({ length: 500 }, (_, k) => ({ type: 'uppercase', payload: { text: `p${i}-${k}` } })));
    }
    await db.sql`update worker.jobs set status = 'done', finished_at = now(), result = 'null' where status = 'queued'`;
    await enqueueBatch(db.sql, Array.from({ length: 5 }, (_, k) => ({ type: 'uppercase', payload: { text: `due-${k}` } })));

    await runner`select pg_stat_force_next_flush()`;
    const before = await sequentialScans(db.sql);
    const jobs = await claimJobs(runner, { workerId: 'plans', limit: 5 });
    expect(jobs).toHaveLength(5);
    expect((await completeJobs(runner, jobs.map((job) => ({ job, result: null })))).size).toBe(5);
    await rescueExpiredLeases(runner);
    await runner`select pg_stat_force_next_flush()`;
    await runner`select 1`; // a transaction end, where the session's counters are flushed
    await db.sql`select pg_stat_clear_snapshot()`;
    expect(await sequentialScans(db.sql)).toBe(before);
  });
});
