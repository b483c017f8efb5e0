import type { Queryable } from '../db.ts';
import type { RescueCounts } from '../maintenance/rescue.ts';
import type { UnclaimedAlertCounts } from '../maintenance/unclaimed.ts';
import { at } from './clock.ts';

/**
 * The maintenance passes' statements over worker.jobs, worker.job_events, worker.alerts and the
 * roll-up tables: each one bounded statement (or one SQL function) returning typed counts.
 * `now` undefined is the database's now().
 */

/** `now` minus `ms` milliseconds, as a timestamptz expression. */
function before(sql: Queryable, now: Date | undefined, ms: number) {
  return sql`${at(sql, now)} - make_interval(secs => ${ms}::bigint / 1000.0)`;
}

interface RescueRow {
  requeued: number;
  failed: number;
  oom_killed: number;
}

/** worker.rescue_expired_leases (migrations/functions/worker.rescue_expired_leases.sql). */
export async function rescueExpiredLeases(sql: Queryable, limit: number, now: Date | undefined): Promise<RescueCounts> {
  const [row] = await sql<RescueRow[]>`select * from worker.rescue_expired_leases(${limit}::int, ${now ?? null}::timestamptz)`;
  return { requeued: row?.requeued ?? 0, failed: row?.failed ?? 0, oomKilled: row?.oom_killed ?? 0 };
}

/**
 * Delete up to `limit` finished jobs past their retention: done and cancelled after `finishedMs`,
 * failed and oom_killed after `failedMs`. How many were deleted.
 */
export async function deleteFinishedJobs(
  sql: Queryable,
  options: { finishedMs: number; failedMs: number; limit: number; now: Date | undefined },
): Promise<number> {
  const finishedCutoff = before(sql, options.now, options.finishedMs);
  const failedCutoff = before(sql, options.now, options.failedMs);
  // The first condition (older than the shorter retention) is a range on jobs_finished_idx; the
  // second applies each status's own retention.
  const [row] = await sql<{ n: number }[]>`
    with old as (
      select id from worker.jobs
       where finished_at < greatest(${finishedCutoff}, ${failedCutoff})
         and finished_at < case when status in ('failed', 'oom_killed') then ${failedCutoff} else ${finishedCutoff} end
       limit ${options.limit}
    ), del as (delete from worker.jobs j using old where j.id = old.id returning j.id),
    -- a deleted parent's waits go with it (and their links, by cascade): a child's link outlives
    -- the child, so its parent still names it
    waits as (delete from worker.child_joins w using del where w.parent_id = del.id)
    select count(*)::int as n from del`;
  return row?.n ?? 0;
}

/** Delete events older than `retentionMs` among the `limit` oldest; how many were deleted. */
export async function deleteOldEvents(sql: Queryable, options: { retentionMs: number; limit: number; now: Date | undefined }): Promise<number> {
  // Events are appended in time order, so the oldest by id are the oldest by time: take the
  // `limit` lowest ids (a walk of the primary key's left edge, however large the table) and
  // delete those past retention: at most `limit` rows read per pass, even when none is old yet.
  // An event stamped later than ones after it (a pinned clock) is kept until its own time comes,
  // taking one place of the batch meanwhile; it does not hold back the events behind it.
  // The events the job rows hold (0160) are left out of a job's history before the mark, which
  // moves with the pass, in the same statement: to the cut, but never past the first event row
  // this pass leaves behind it (a full batch stops short of older rows). Else a row-held event
  // could be hidden while an older event row of its job is still shown: a history with a hole
  // until the next pass, where retention keeps a suffix.
  const cut = before(sql, options.now, options.retentionMs);
  const [row] = await sql<{ n: number }[]>`
    with oldest as (select id, at from worker.job_events order by id limit ${options.limit}),
    del as (
      delete from worker.job_events e using oldest o
       where e.id = o.id and o.at < ${cut}
      returning 1),
    mark as (
      update worker.event_retention
         set kept_from = greatest(kept_from, least(${cut},
               (select e.at from worker.job_events e where e.id > (select max(o.id) from oldest o) order by e.id limit 1)))
       where id = 1)
    select count(*)::int as n from del`;
  return row?.n ?? 0;
}

export interface SignalPruneCounts {
  signalWaits: number;
  signalEvents: number;
  signalEventsExpired: number;
  signalChannels: number;
}

/** worker.prune_signals (migrations/functions/worker.prune_signals.sql): one bounded pass over the signals' rows. */
export async function pruneSignals(sql: Queryable, options: { keptRetentionMs: number; limit: number; now: Date | undefined }): Promise<SignalPruneCounts> {
  const [row] = await sql<{ waits: number; events: number; expired: number; channels: number }[]>`
    select * from worker.prune_signals(${before(sql, options.now, options.keptRetentionMs)}, ${options.limit}::int)`;
  return { signalWaits: row?.waits ?? 0, signalEvents: row?.events ?? 0, signalEventsExpired: row?.expired ?? 0, signalChannels: row?.channels ?? 0 };
}

/** Open (or see again) a stuck_job alert for each job running since before `thresholdMs` ago; how many opened. */
export async function openStuckJobAlerts(sql: Queryable, thresholdMs: number, now: Date | undefined): Promise<number> {
  const [row] = await sql<{ n: number }[]>`
    with stuck as (
      select id, type, locked_by, claimed_at from worker.jobs
       where status = 'running' and claimed_at < ${before(sql, now, thresholdMs)}
    ), ins as (
      insert into worker.alerts (kind, key, job_id, message, detail, opened_at, last_seen_at)
      select 'stuck_job', id::text, id, 'job ' || id || ' (' || type || ') has been running since ' || claimed_at || ' on ' || coalesce(locked_by, '?'),
             jsonb_build_object('type', type, 'owner', locked_by, 'since', claimed_at),
             ${at(sql, now)}, ${at(sql, now)}
        from stuck
      on conflict (kind, key) where resolved_at is null
      do update set last_seen_at = excluded.last_seen_at, occurrences = worker.alerts.occurrences + 1
      returning (xmax = 0) as inserted
    )
    select count(*) filter (where inserted)::int as n from ins`;
  return row?.n ?? 0;
}

/** Resolve the open stuck_job alerts whose job is no longer running past the threshold; how many. */
export async function resolveStuckJobAlerts(sql: Queryable, thresholdMs: number, now: Date | undefined): Promise<number> {
  const [row] = await sql<{ n: number }[]>`
    with res as (
      update worker.alerts a set resolved_at = ${at(sql, now)}
       where a.kind = 'stuck_job' and a.resolved_at is null
         and not exists (select 1 from worker.jobs j where j.id = a.job_id and j.status = 'running'
                           and j.claimed_at < ${before(sql, now, thresholdMs)})
      returning a.id)
    select count(*)::int as n from res`;
  return row?.n ?? 0;
}

/**
 * Open a deadline_missed alert for each job past its deadline that has not ended and never had
 * one (the earliest `limit`); how many opened. A range scan of jobs_deadline_idx. The conflict
 * clause names no index, so alerts_deadline_missed_uq (one per job, ever) is an arbiter: a
 * concurrent pass inserting the same job's alert waits for this one and then does nothing.
 */
export async function openDeadlineAlerts(sql: Queryable, limit: number, now: Date | undefined): Promise<number> {
  const [row] = await sql<{ n: number }[]>`
    with missed as (
      select j.id, j.type, j.status, j.created_at, j.deadline_at, j.deadline_severity from worker.jobs j
       where j.deadline_at <= ${at(sql, now)} and j.deadline_at is not null and j.status in ('queued', 'running')
         and not exists (select 1 from worker.alerts a where a.kind = 'deadline_missed' and a.key = j.id::text)
       order by j.deadline_at
       limit ${limit}
    ), ins as (
      insert into worker.alerts (kind, key, job_id, severity, message, detail, opened_at, last_seen_at)
      select 'deadline_missed', id::text, id, deadline_severity,
             'job ' || id || ' (' || type || ') missed its deadline ' || deadline_at || ' (enqueued ' || created_at || '), still ' || status,
             jsonb_build_object('type', type, 'deadlineAt', deadline_at, 'enqueuedAt', created_at, 'severity', deadline_severity),
             ${at(sql, now)}, ${at(sql, now)}
        from missed
      on conflict do nothing
      returning 1
    )
    select count(*)::int as n from ins`;
  return row?.n ?? 0;
}

/** Resolve the open deadline_missed alerts whose job ended (or was pruned); how many. */
export async function resolveDeadlineAlerts(sql: Queryable, now: Date | undefined): Promise<number> {
  const [row] = await sql<{ n: number }[]>`
    with res as (
      update worker.alerts a set resolved_at = ${at(sql, now)}
       where a.kind = 'deadline_missed' and a.resolved_at is null
         and not exists (select 1 from worker.jobs j where j.id = a.job_id and j.status in ('queued', 'running'))
      returning a.id)
    select count(*)::int as n from res`;
  return row?.n ?? 0;
}

/** worker.alert_unclaimed_jobs (migrations/functions/worker.alert_unclaimed_jobs.sql). */
export async function alertUnclaimedJobs(
  sql: Queryable,
  options: { thresholdMs: number; limit: number; now: Date | undefined },
): Promise<UnclaimedAlertCounts> {
  const [row] = await sql<UnclaimedAlertCounts[]>`
    select opened, refreshed, resolved
      from worker.alert_unclaimed_jobs(${options.thresholdMs}::bigint, ${options.limit}::int, ${options.now ?? null}::timestamptz)`;
  return { opened: row?.opened ?? 0, refreshed: row?.refreshed ?? 0, resolved: row?.resolved ?? 0 };
}

/** worker.check_leader_churn: opens or resolves the leader_churn alert. */
export async function checkLeaderChurn(
  sql: Queryable,
  options: { maxChanges: number; windowMs: number; now: Date | undefined },
): Promise<{ opened: number; resolved: number }> {
  const [row] = await sql<{ opened: number; resolved: number }[]>`
    select opened, resolved from worker.check_leader_churn(${options.maxChanges}, ${options.windowMs}, ${options.now ?? null}::timestamptz)`;
  return { opened: row?.opened ?? 0, resolved: row?.resolved ?? 0 };
}

/** worker.rollup_job_events: the events rolled up (0 when another roll-up holds the row). */
export async function rollupJobEvents(sql: Queryable, now: Date | undefined): Promise<number> {
  const [row] = await sql<{ n: number }[]>`select worker.rollup_job_events(p_now => ${now ?? null}::timestamptz) as n`;
  return row?.n ?? 0;
}

/** worker.record_depth_snapshot: the queue's depth at `at`. */
export async function recordDepthSnapshot(sql: Queryable, at: Date): Promise<void> {
  await sql`select worker.record_depth_snapshot(${at})`;
}

/** Milliseconds until the next queued job runnable by `pool` falls due; null when nothing is queued. */
export async function nextDueInMs(sql: Queryable, pool: string, now: Date | undefined): Promise<number | null> {
  const [row] = await sql<{ due_in_ms: number | null }[]>`
    -- null when nothing is queued (greatest() would turn the null into 0). A parked job's run_at
    -- is 'infinity' and never falls due: it is left out, because Postgres 15 and 16 raise
    -- "cannot subtract infinite timestamps" on 'infinity' - now() (17 returns an infinite interval).
    select (extract(epoch from min(run_at) - ${at(sql, now)}) * 1000)::float8 as due_in_ms
      from worker.jobs
     where status = 'queued' and run_at < 'infinity' and (pool is null or pool = ${pool})`;
  return row?.due_in_ms ?? null;
}
