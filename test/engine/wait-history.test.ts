// Postgres matrix: the history of waits, in its event rows and against the previous release.
import { describe, expect, it } from 'vitest';
import type { Sql } from '../../queue/db.ts';
import {
  cancelJob, claimJobs, completeJob, endTimedOutWait, enqueue, pruneFinished, replayJob, rescueExpiredLeases, retryJob,
  settleCancelled, settleWait, signalJob, waitFor, type Job, type JsonObject,
} from '../../queue/index.ts';
import { migrate } from '../../queue/migrate.ts';
import { checkHistory } from '../../scripts/lib/history.ts';
import { createTestDatabase } from '../support/db.ts';
import { emptyDatabase, previousRelease } from '../support/previous-release.ts';

/**
 * 0260: a step resumed by its wait's timeout that waits again (the build job's poll loop) writes
 * one event row, where it wrote four (claimed, wait_timed_out, checkpoint, waiting); the history
 * (worker.job_history) reads the same, event for event, ids included.
 */

const T0 = new Date('2027-02-01T00:00:00Z');
const at = (ms: number) => new Date(T0.getTime() + ms);
const TYPES = ['wh_poll', 'wh_retry', 'wh_expire', 'wh_cancel', 'wh_requeue', 'wh_signal', 'wh_mid_a', 'wh_mid_b', 'wh_done'];

async function claim(sql: Sql, type: string, now: Date): Promise<Job> {
  const [job] = await claimJobs(sql, { workerId: 'wait-history', limit: 1, types: [type], now });
  if (!job) throw new Error(`nothing of ${type} claimed at ${now.toISOString()}`);
  return job;
}

/** The poll's wait: the build job's shape, a wait for its build's event that times out at the poll interval. */
const pollWait = (key: string, n: number) => waitFor('wh_built', { key, timeoutMs: 1000, step: 'poll', checkpoint: { polls: n } as JsonObject });

async function wait(sql: Sql, job: Job, n: number, now: Date): Promise<void> {
  expect(await settleWait(sql, job, pollWait(job.type, n), { now })).toBe('waiting');
}

/** A poll: the claim at the timeout, the wait's end, and a wait again. */
async function poll(sql: Sql, type: string, n: number, now: Date): Promise<void> {
  const job = await claim(sql, type, now);
  expect(await endTimedOutWait(sql, job, { now: new Date(now.getTime() + 10) })).toMatchObject({ outcome: 'timed_out' });
  await wait(sql, job, n, new Date(now.getTime() + 50));
}

/** Enqueued, its first step waiting; each poll a second later. */
async function started(sql: Sql, type: string, t: number): Promise<string> {
  const { job } = await enqueue(sql, { type, payload: {} }, { now: at(t) });
  await wait(sql, await claim(sql, type, at(t + 100)), 0, at(t + 200));
  return job.id;
}

/**
 * The same operations on any release's functions (they keep their signatures): `before` runs on
 * the release that is there, then `between` (a migration, or nothing), then the rest.
 */
async function scenario(sql: Sql, between: (ids: Record<string, string>) => Promise<void>): Promise<Record<string, string>> {
  const ids: Record<string, string> = {};
  // Before: a poll loop two polls in; two jobs caught mid-poll, one with its wait ended, one not.
  ids.poll = await started(sql, 'wh_poll', 0);
  await poll(sql, 'wh_poll', 1, at(1_200));
  await poll(sql, 'wh_poll', 2, at(2_300));
  ids.midA = await started(sql, 'wh_mid_a', 0);
  const midA = await claim(sql, 'wh_mid_a', at(1_300));
  await endTimedOutWait(sql, midA, { now: at(1_310) });
  ids.midB = await started(sql, 'wh_mid_b', 0);
  const midB = await claim(sql, 'wh_mid_b', at(1_400));

  await between({ ...ids });

  // the two caught mid-poll carry on
  await wait(sql, midA, 1, at(1_500));
  expect(await endTimedOutWait(sql, midB, { now: at(1_410) })).toMatchObject({ outcome: 'timed_out' });
  await wait(sql, midB, 1, at(1_600));
  // the poll loop: three more polls, then the last one is done
  for (let n = 3; n <= 5; n++) await poll(sql, 'wh_poll', n, at(n * 1_100 + 200));
  const last = await claim(sql, 'wh_poll', at(7_000));
  await endTimedOutWait(sql, last, { now: at(7_010) });
  expect(await completeJob(sql, last, { image: 'x' }, { now: at(7_050) })).toBe(true);

  // a resumed step that throws: retried, and its retry sees the same event
  ids.retry = await started(sql, 'wh_retry', 10_000);
  const failing = await claim(sql, 'wh_retry', at(11_200));
  await endTimedOutWait(sql, failing, { now: at(11_210) });
  expect(await retryJob(sql, failing, 'depot said 502', 0, { now: at(11_300) })).toBe('queued');
  const retried = await claim(sql, 'wh_retry', at(11_400));
  expect(await endTimedOutWait(sql, retried, { now: at(11_410) })).toMatchObject({ outcome: 'timed_out', at: expect.any(String) });
  await wait(sql, retried, 1, at(11_500));
  await poll(sql, 'wh_retry', 2, at(12_600));

  // a resumed step whose lease expires: rescued, claimed again, it waits again
  ids.expire = await started(sql, 'wh_expire', 20_000);
  const lost = await claim(sql, 'wh_expire', at(21_200));
  await endTimedOutWait(sql, lost, { now: at(21_210) });
  await rescueExpiredLeases(sql, { now: at(21_200 + 31_000) });
  await wait(sql, await claim(sql, 'wh_expire', at(52_300)), 1, at(52_400));

  // a cancel asked while the resumed step runs: its wait settles as cancelling, the cancel path runs
  ids.cancel = await started(sql, 'wh_cancel', 60_000);
  const cancelled = await claim(sql, 'wh_cancel', at(61_200));
  await endTimedOutWait(sql, cancelled, { now: at(61_210) });
  await cancelJob(sql, ids.cancel, 'superseded', { now: at(61_250) });
  expect(await settleWait(sql, cancelled, pollWait('wh_cancel', 1), { now: at(61_300) })).toBe('cancelling');
  expect(await settleCancelled(sql, await claim(sql, 'wh_cancel', at(61_400)), { now: at(61_500) })).toBe(true);

  // done after a timed-out wait, then set back to queued by hand and done again
  ids.requeue = await started(sql, 'wh_requeue', 70_000);
  const finishing = await claim(sql, 'wh_requeue', at(71_200));
  await endTimedOutWait(sql, finishing, { now: at(71_210) });
  expect(await completeJob(sql, finishing, null, { now: at(71_300) })).toBe(true);
  await sql`update worker.jobs set status = 'queued', finished_at = null, result = null, run_at = ${at(72_000)} where id = ${ids.requeue}`;
  expect(await completeJob(sql, await claim(sql, 'wh_requeue', at(72_100)), null, { now: at(72_200) })).toBe(true);

  // signalled: one event while it waits, one kept and taken by its next wait at once
  ids.signal = await started(sql, 'wh_signal', 80_000);
  await signalJob(sql, ids.signal, 'wh_built', { key: 'wh_signal', payload: { ok: 1 }, now: at(80_500) });
  const woken = await claim(sql, 'wh_signal', at(80_600));
  await signalJob(sql, ids.signal, 'wh_built', { key: 'wh_signal', payload: { ok: 2 }, now: at(80_650) });
  expect(await settleWait(sql, woken, pollWait('wh_signal', 1), { now: at(80_700) })).toBe('signalled');
  await wait(sql, await claim(sql, 'wh_signal', at(80_800)), 2, at(80_900));
  // a job done in its first resumed step, held whole on its row
  ids.done = await started(sql, 'wh_done', 90_000);
  const quick = await claim(sql, 'wh_done', at(91_200));
  await endTimedOutWait(sql, quick, { now: at(91_210) });
  expect(await completeJob(sql, quick, null, { now: at(91_300) })).toBe(true);
  return ids;
}

interface Event {
  id: number;
  at: string;
  kind: string;
  detail: Record<string, unknown>;
}

/** Each job's history, by the scenario's names; a lease's random token is left out. */
async function histories(sql: Sql, ids: Record<string, string>): Promise<Record<string, Event[]>> {
  const out: Record<string, Event[]> = {};
  for (const [name, id] of Object.entries(ids)) {
    const rows = await sql<Event[]>`select id::int, at, kind, detail from worker.job_history where job_id = ${id} order by id`;
    out[name] = rows.map((r) => ({
      id: r.id, at: new Date(r.at).toISOString(), kind: r.kind,
      detail: 'token' in r.detail ? { ...r.detail, token: typeof r.detail.token } : r.detail,
    }));
  }
  return out;
}
const eventRows = async (sql: Sql, id: string) => (await sql`select count(*)::int as n from worker.job_events where job_id = ${id}`)[0]!.n as number;
const stepStats = (sql: Sql) => sql`select type, outcome, bucket, steps, seconds from worker.current_step_stats() order by type, outcome, bucket`;

async function oldRelease(prefix: string): Promise<Sql> {
  const sql = await emptyDatabase(prefix);
  await migrate(sql, previousRelease('0260'));
  await sql`insert into worker.job_types (type, lease_ms, max_attempts) select t, 30000, 3 from unnest(${TYPES}::text[]) t`;
  return sql;
}

describe('the history of a wait that times out', () => {
  it('a build-like poll loop writes one event row per poll; the history tells each poll in four events', async () => {
    const { sql } = await createTestDatabase();
    await sql`insert into worker.job_types (type, lease_ms, max_attempts) values ('wh_loop', 30000, 3) on conflict do nothing`;
    const id = await started(sql, 'wh_loop', 0);
    const afterStart = await eventRows(sql, id);
    expect(afterStart).toBe(2); // enqueued; the first wait (carrying its claim and checkpoint)
    const N = 20;
    for (let n = 1; n <= N; n++) {
      await poll(sql, 'wh_loop', n, at(n * 1_100 + 200));
      expect(await eventRows(sql, id)).toBe(afterStart + n);
    }
    // the poll that sees the build done waits a moment for its event (the build job's shape), then finish is done
    const seen = await claim(sql, 'wh_loop', at(30_000));
    await endTimedOutWait(sql, seen, { now: at(30_010) });
    expect(await settleWait(sql, seen, waitFor('wh_built', { key: 'wh_loop', timeoutMs: 1, step: 'finish' }), { now: at(30_050) })).toBe('waiting');
    expect(await eventRows(sql, id)).toBe(afterStart + N + 1);
    // the finish writes no row: its claim, the wait's end and done are on the job row
    const last = await claim(sql, 'wh_loop', at(30_100));
    await endTimedOutWait(sql, last, { now: at(30_110) });
    expect((await sql`select kind from worker.job_history where job_id = ${id} order by id desc limit 2`).map((r) => r.kind))
      .toEqual(['wait_timed_out', 'claimed']);
    expect(await completeJob(sql, last, null, { now: at(30_150) })).toBe(true);
    expect(await eventRows(sql, id)).toBe(afterStart + N + 1);

    const kinds = (await sql`select kind from worker.job_history where job_id = ${id} order by id`).map((r) => r.kind);
    const pollKinds = ['claimed', 'wait_timed_out', 'checkpoint', 'waiting'];
    expect(kinds).toEqual(['enqueued', 'claimed', 'checkpoint', 'waiting', ...Array.from({ length: N + 1 }, () => pollKinds).flat(),
      'claimed', 'wait_timed_out', 'done']);
    expect((await checkHistory(sql, { type: 'wh_loop' })).problems).toEqual([]);
    // a replay may start at a step the job reached in a wait's carried checkpoint
    expect((await replayJob(sql, id, { fromStep: 'poll', now: at(40_000) })).step).toBe('poll');
  });

  it('reads event for event as the previous release wrote it, across the migration, and rolls up the same steps', async () => {
    const previous = await oldRelease('sbt_waithist_old');
    const migrated = await oldRelease('sbt_waithist_new');
    let before: Record<string, Event[]> = {};
    const oldIds = await scenario(previous, async () => {});
    const newIds = await scenario(migrated, async (ids) => {
      before = await histories(migrated, ids);
      expect(await migrate(migrated)).toContain('0260_wait_history_rows.sql');
      expect(await histories(migrated, ids)).toEqual(before);
    });
    expect(Object.keys(before)).toHaveLength(3);
    const expected = await histories(previous, oldIds);
    const got = await histories(migrated, newIds);
    expect(got).toEqual(expected);
    expect(got.poll!.filter((e) => e.kind === 'wait_timed_out')).toHaveLength(6); // five polls and the last

    // the same steps rolled up, from fewer rows
    await previous`select worker.rollup_job_events(0, 100000, ${at(200_000)})`;
    await migrated`select worker.rollup_job_events(0, 100000, ${at(200_000)})`;
    expect(await stepStats(migrated)).toEqual(await stepStats(previous));
    // three polls after the migration wrote three rows where the previous release wrote twelve,
    // and the last poll, done, none where it wrote its wait's end
    expect(await eventRows(previous, oldIds.poll!) - await eventRows(migrated, newIds.poll!)).toBe(10);
    // the replayer finds every history sound (but the one a statement by hand set back from done)
    expect((await checkHistory(migrated)).problems.filter((p) => !p.includes(newIds.requeue!))).toEqual([]);
  });

  it('the history view is costed by its tables: a read of a small history stays under the JIT threshold', async () => {
    // Joined as a table, event retention's one row was estimated at 2,040 rows, multiplied by
    // each carried row's 100 estimated elements: a read of a few hundred events was costed in
    // the millions, and a server with JIT compiled it for most of a second on every read.
    const { sql } = await createTestDatabase();
    await sql`insert into worker.job_types (type, lease_ms, max_attempts) values ('wh_cost', 30000, 3) on conflict do nothing`;
    for (let i = 0; i < 5; i++) await started(sql, 'wh_cost', i * 10_000);
    const [plan] = await sql`explain (format json) select * from worker.job_history where id > 0 order by id`;
    const cost = (plan!['QUERY PLAN'] as Array<{ Plan: { 'Total Cost': number } }>)[0]!.Plan['Total Cost'];
    expect(cost).toBeLessThan(100_000); // jit_above_cost's default
  });

  it('event retention keeps a suffix of a history whose events a row carries', async () => {
    const { sql } = await createTestDatabase();
    await sql`insert into worker.job_types (type, lease_ms, max_attempts) values ('wh_pruned', 30000, 3) on conflict do nothing`;
    const id = await started(sql, 'wh_pruned', 1_000_000);
    const job = await claim(sql, 'wh_pruned', at(1_001_200));
    await endTimedOutWait(sql, job, { now: at(1_005_000) });
    await wait(sql, job, 1, at(1_009_000));
    const whole = await histories(sql, { id });
    expect(whole.id!.map((e) => e.kind)).toEqual(['enqueued', 'claimed', 'checkpoint', 'waiting', 'claimed', 'wait_timed_out', 'checkpoint', 'waiting']);
    await sql`delete from worker.job_events where at < ${at(1_000_000)}`; // only this job's events are old enough
    // the cut falls between the poll's claim and its wait's end: the carried claim goes with what is before it
    await pruneFinished(sql, { eventRetentionMs: 1_003_000, finishedRetentionMs: 1e12, failedRetentionMs: 1e12, now: at(2_006_000) });
    expect((await histories(sql, { id })).id).toEqual(whole.id!.slice(5));
    await sql`update worker.event_retention set kept_from = '-infinity'`;
  });
});
