// Postgres matrix: migrations from the previous release.
import { describe, expect, it } from 'vitest';
import type { Sql } from '../../queue/db.ts';
import { claimJobs, completeJob, continueJob, enqueue, enqueueBatch, failJob, retryJob, type Job } from '../../queue/index.ts';
import { migrate } from '../../queue/migrate.ts';
import { emptyDatabase, previousRelease } from '../support/previous-release.ts';
import { checkHistory } from '../../scripts/lib/history.ts';

/**
 * 0160 moves a database's history onto the job rows: a database filled by the release before it
 * (its migrations and functions, as git holds them: see test/support/previous-release.ts)
 * migrates without losing or changing one event of any job,
 * and the rolled-up step statistics read the same.
 */

const T0 = new Date('2026-09-01T00:00:00Z');
const at = (ms: number) => new Date(T0.getTime() + ms);

async function claim(sql: Sql, now: Date, type = 'mig_probe'): Promise<Job> {
  const [job] = await claimJobs(sql, { workerId: 'old-release', limit: 1, types: [type], now });
  if (!job) throw new Error('nothing claimed');
  return job;
}

const eventsByJob = (sql: Sql, table: 'job_events' | 'job_history') =>
  sql`select job_id, id::int, at, kind, detail from ${sql('worker')}.${sql(table)} order by job_id, id`;
const stepStats = (sql: Sql) => sql`select * from worker.current_step_stats() order by type, outcome, bucket`;
const counters = (sql: Sql) => sql`select * from worker.current_job_counters() order by type, counter`;

describe('0160 on a database the release before it filled', () => {
  it('keeps every event of every job, in order and unchanged, and the step statistics; the engine carries on', async () => {
    const sql = await emptyDatabase('sbt_mighist');
    await migrate(sql, previousRelease('0160'));
    expect((await sql`select to_regclass('worker.job_history') as v`)[0]!.v).toBeNull();
    await sql`insert into worker.job_types (type, lease_ms, max_attempts) values ('mig_probe', 30000, 3), ('mig_relength', 30000, 3)`;
    const job = async (ms: number, type = 'mig_probe') => (await enqueue(sql, { type, payload: { ms } }, { now: at(ms) })).job.id;

    // done in one step; done after a continue; failed after a retry
    const oneStep = await job(0);
    await completeJob(sql, await claim(sql, at(1_000)), { n: 1 }, { now: at(1_400) });
    const twoSteps = await job(2_000);
    await continueJob(sql, await claim(sql, at(2_100)), { step: 'two', delayMs: 0 }, { now: at(2_200) });
    await completeJob(sql, await claim(sql, at(2_300)), null, { now: at(5_300) });
    const failed = await job(6_000);
    expect(await retryJob(sql, await claim(sql, at(6_100)), 'flaky', 0, { now: at(6_200) })).toBe('queued');
    await failJob(sql, await claim(sql, at(6_300)), 'broken', { now: at(6_400) });
    // the events so far are rolled up; the rest is the tail the metrics add
    await sql`select worker.rollup_job_events(0, 100000, ${at(7_000)})`;
    // done, whose claimed event retention already removed
    const pruned = await job(8_000);
    await completeJob(sql, await claim(sql, at(8_100)), null, { now: at(8_200) });
    await sql`delete from worker.job_events where job_id = ${pruned} and kind = 'claimed'`;
    // between steps; running; running on a lease the type has since lengthened
    const between = await job(9_000);
    await continueJob(sql, await claim(sql, at(9_100)), { step: 'two', delayMs: 100_000 }, { now: at(9_200) });
    const running = await job(10_000);
    const runningClaim = await claim(sql, at(10_100));
    expect(runningClaim.id).toBe(running);
    const relengthened = await job(11_000, 'mig_relength');
    const relengthenedClaim = await claim(sql, at(11_100), 'mig_relength');
    await sql`update worker.job_types set lease_ms = 45000 where type = 'mig_relength'`;
    const waiting = await job(12_000);
    // enqueued in a batch: one waiting, one whose run_at a continue moved since
    const [batched = "", batchedMoved = ""] = (await enqueueBatch(sql, [{ type: 'mig_probe', payload: {}, runAt: at(12_500) },
      { type: 'mig_relength', payload: {}, runAt: at(12_600) }], { now: at(12_100) })).map((r) => r.job.id);
    await continueJob(sql, await claim(sql, at(12_700), 'mig_relength'), { step: 'two', delayMs: 100_000 }, { now: at(12_800) });

    const before = { events: await eventsByJob(sql, 'job_events'), stats: await stepStats(sql), counters: await counters(sql) };
    const eventRowsBefore = before.events.length;
    expect(before.stats.length).toBeGreaterThan(2);

    const applied = await migrate(sql);
    expect(applied[0]).toBe('0160_row_held_history.sql');
    expect(await eventsByJob(sql, 'job_history')).toEqual(before.events);
    expect(await stepStats(sql)).toEqual(before.stats);
    expect(await counters(sql)).toEqual(before.counters);
    // what moved onto the rows: the two done jobs' claims and done events, the running claim
    const moved = await sql`select id, enqueued_event_id is not null as enq, claimed_event_id is not null as claim,
                                   done_event_id is not null as done from worker.jobs order by id`;
    expect(Object.fromEntries(moved.map((r) => [r.id, [r.enq, r.claim, r.done]]))).toEqual({
      [oneStep]: [false, true, true], [twoSteps]: [false, true, true], [failed]: [false, false, false], [pruned]: [false, false, false],
      [between]: [false, false, false], [running]: [false, true, false], [relengthened]: [false, false, false],
      [waiting]: [false, false, false], [batched]: [true, false, false], [batchedMoved]: [false, false, false],
    });
    expect((await sql`select count(*)::int as n from worker.job_events`)[0]!.n).toBe(eventRowsBefore - 6);

    // the new release finishes what the old one started, on the old claims' tokens
    expect(await completeJob(sql, runningClaim, null, { now: at(13_000) })).toBe(true);
    expect(await completeJob(sql, relengthenedClaim, null, { now: at(13_100) })).toBe(true);
    await completeJob(sql, await claim(sql, at(13_200)), null, { now: at(13_300) });
    await completeJob(sql, await claim(sql, at(13_600)), null, { now: at(13_700) });
    await completeJob(sql, await claim(sql, at(200_000)), null, { now: at(200_100) });
    await completeJob(sql, await claim(sql, at(200_200), 'mig_relength'), null, { now: at(200_300) });
    const kinds = async (id: string) => (await sql`select kind from worker.job_history where job_id = ${id} order by id`).map((r) => r.kind);
    expect(await kinds(running)).toEqual(['enqueued', 'claimed', 'done']);
    expect(await kinds(relengthened)).toEqual(['enqueued', 'claimed', 'done']);
    expect(await kinds(between)).toEqual(['enqueued', 'claimed', 'checkpoint', 'claimed', 'done']);
    expect(await kinds(waiting)).toEqual(['enqueued', 'claimed', 'done']);
    expect(await kinds(batched)).toEqual(['enqueued', 'claimed', 'done']);
    expect(await kinds(batchedMoved)).toEqual(['enqueued', 'claimed', 'checkpoint', 'claimed', 'done']);
    // the replay needs whole histories: the job whose claim retention removed goes the same way
    await sql`delete from worker.jobs where id = ${pruned}`;
    await sql`delete from worker.job_events where job_id = ${pruned}`;
    expect((await checkHistory(sql)).problems).toEqual([]);
    const done = (rows: Awaited<ReturnType<typeof stepStats>>) => rows.filter((r) => r.outcome === 'done').reduce((n, r) => n + Number(r.steps), 0);
    expect(done(await stepStats(sql))).toBe(done(before.stats) + 6);
  });
});
