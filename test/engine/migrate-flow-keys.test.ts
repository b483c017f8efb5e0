// Postgres matrix: migrations from the previous release.
import { describe, expect, it } from 'vitest';
import { enqueue, listRateLimits, pruneFinished, sendEvent } from '../../queue/index.ts';
import { migrate } from '../../queue/migrate.ts';
import { emptyDatabase, previousRelease } from '../support/previous-release.ts';

/**
 * 0240 on a database the release before it filled: the enqueue functions' new arguments replace
 * the old signatures (no overload left for a call to resolve to), the jobs and kept events from
 * before are there, and the prune takes the signals' rows from then on.
 */
describe('0240 on a database the release before it filled', () => {
  it('replaces the enqueue signatures, keeps the rows, and prunes the signal rows written before it', async () => {
    const sql = await emptyDatabase('sbt_migflow');
    await migrate(sql, previousRelease('0240'));
    await sql`insert into worker.job_types (type, lease_ms, max_attempts) values ('mig_flow', 120000, 5)`;
    const before = (await enqueue(sql, { type: 'mig_flow', payload: { n: 1 }, deadlineMs: 60_000 })).job;
    await sendEvent(sql, 'mig-old-event', { payload: 1, now: new Date('2031-01-01T00:00:00Z') });

    const applied = await migrate(sql);
    expect(applied).toContain('0240_signal_retention_enqueue_flow_keys.sql');
    const overloads = await sql`
      select p.proname, count(*)::int as n from pg_proc p join pg_namespace n on n.oid = p.pronamespace
       where n.nspname = 'worker' and p.proname in ('enqueue_job', 'enqueue_job_ex') group by 1 order by 1`;
    expect(overloads).toEqual([{ proname: 'enqueue_job', n: 1 }, { proname: 'enqueue_job_ex', n: 1 }]);
    // the old calls still resolve (the new arguments are trailing, with defaults)
    const [old] = await sql`select id from worker.enqueue_job('mig_flow', '{"n": 2}', 50, null, null, null, null, null, null, null, null, null, 60000, 'warning')`;
    expect(old!.id).toBeTruthy();
    const [own] = await sql`select rate_key from worker.enqueue_job('mig_flow', '{}', rate_limit => '{"key": "mig:key", "limit": 2, "per": "1m"}')`;
    expect(own!.rate_key).toBe('mig:key');
    expect((await listRateLimits(sql)).map((r) => r.key)).toEqual(['mig:key']);
    expect((await sql`select id from worker.jobs where id = ${before.id}`)).toHaveLength(1);

    const counts = await pruneFinished(sql, { now: new Date('2031-02-01T00:00:00Z') });
    expect(counts).toMatchObject({ signalEventsExpired: 1, signalChannels: 1 });
    expect(await sql`select * from worker.signal_channels`).toEqual([]);
  });
});
