// Postgres matrix: the claim's plans, which each major's planner makes anew.
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

/**
 * Turning a scan type off makes Postgres cost any plan that still needs it at 10^10, far past
 * jit_above_cost: on a server built with LLVM (Debian's and most packaged ones; not the embedded
 * one) every such statement — the trigger writing a rescued job's held events among them, since a
 * function's SET reaches the triggers it fires — was JIT-compiled, 0.4 to 0.6 s of CPU each, and
 * the chaos test's claims on Postgres 15 took seconds. Those functions turn JIT off as well.
 */
describe('functions that turn a scan type off', () => {
  it('turn JIT off too', async () => {
    const rows = await db.sql`
      select p.proname, p.proconfig from pg_proc p
       where p.pronamespace = 'worker'::regnamespace
         and exists (select from unnest(p.proconfig) c where c in ('enable_seqscan=off', 'enable_bitmapscan=off'))
       order by p.proname`;
    expect(rows.map((r) => r.proname)).toEqual(['claim_jobs', 'complete_jobs', 'fair_claim_candidates', 'rescue_expired_leases']);
    for (const r of rows) expect(r.proconfig, r.proname as string).toContain('jit=off');
  });

  it("reach the held-events trigger a rescue fires with JIT off", async () => {
    // A trigger beside the engine's records the settings the rescue's update runs its triggers under.
    await db.sql`create table public.trigger_settings (jit text, seqscan text)`;
    await db.sql`create function public.record_trigger_settings() returns trigger language plpgsql as $$
                 begin insert into public.trigger_settings values (current_setting('jit'), current_setting('enable_seqscan')); return null; end $$`;
    await db.sql`create trigger zz_record_settings after update on worker.jobs for each row execute function public.record_trigger_settings()`;
    try {
      const [job] = await enqueueBatch(db.sql, [{ type: 'uppercase', payload: { text: 'expiring' } }]);
      await db.sql`update worker.jobs set status = 'done', finished_at = now(), result = 'null' where status = 'queued' and id <> ${job!.job.id}`;
      const [claimed] = await claimJobs(db.sql, { workerId: 'jit', limit: 1 });
      expect(claimed!.id).toBe(job!.job.id);
      await db.sql`delete from public.trigger_settings`;
      expect(await rescueExpiredLeases(db.sql, { now: new Date(Date.now() + 86_400_000) })).toMatchObject({ requeued: 1 });
      expect(await db.sql`select jit, seqscan from public.trigger_settings`).toEqual([{ jit: 'off', seqscan: 'off' }]);
    } finally {
      await db.sql`drop trigger zz_record_settings on worker.jobs`;
      await db.sql`drop table public.trigger_settings`;
      await db.sql`drop function public.record_trigger_settings()`;
    }
  });
});
