import type { Queryable } from './db.ts';
import { translatePgError } from './errors.ts';

/**
 * Maintenance passes, each one bounded `runOnce` that returns counts (the tick is the ticker).
 */

export interface RescueCounts {
  requeued: number;
  failed: number;
  oomKilled: number;
}

/**
 * Expired leases: requeue one weight class up, or end oom_killed / failed (with alerts). A job
 * pinned to a pool climbs only to the largest class that pool can run; a crash there ends it
 * oom_killed, like a crash at the top class (migrations/0082).
 */
export async function rescueExpiredLeases(sql: Queryable, options: { limit?: number; now?: Date } = {}): Promise<RescueCounts> {
  const [row] = await sql`select * from worker.rescue_expired_leases(${options.limit ?? 1000}::int, ${options.now ?? null}::timestamptz)`;
  return { requeued: row!.requeued as number, failed: row!.failed as number, oomKilled: row!.oom_killed as number };
}

export interface PruneOptions {
  /** Keep done and cancelled jobs this long after they finished (default 7 days). */
  finishedRetentionMs?: number;
  /** Keep failed and oom_killed jobs this long, for post-mortems (default 30 days). */
  failedRetentionMs?: number;
  /** Keep events this long (default 30 days). */
  eventRetentionMs?: number;
  /** At most this many rows of each kind per pass, so one pass stays short. */
  limit?: number;
  now?: Date;
}

const DAY_MS = 86_400_000;

/** Delete finished jobs and events past their retention; returns how many of each. */
export async function pruneFinished(sql: Queryable, options: PruneOptions = {}): Promise<{ jobs: number; events: number }> {
  const now = options.now ?? null;
  const limit = options.limit ?? 10_000;
  const finishedMs = options.finishedRetentionMs ?? 7 * DAY_MS;
  const failedMs = options.failedRetentionMs ?? 30 * DAY_MS;
  const eventMs = options.eventRetentionMs ?? 30 * DAY_MS;
  const finishedCutoff = sql`coalesce(${now}::timestamptz, now()) - make_interval(secs => ${finishedMs}::bigint / 1000.0)`;
  const failedCutoff = sql`coalesce(${now}::timestamptz, now()) - make_interval(secs => ${failedMs}::bigint / 1000.0)`;
  // The first condition (older than the shorter retention) is a range on jobs_finished_idx; the
  // second applies each status's own retention.
  const [jobs] = await sql`
    with old as (
      select id from worker.jobs
       where finished_at < greatest(${finishedCutoff}, ${failedCutoff})
         and finished_at < case when status in ('failed', 'oom_killed') then ${failedCutoff} else ${finishedCutoff} end
       limit ${limit}
    ), del as (delete from worker.jobs j using old where j.id = old.id returning j.id)
    select count(*)::int as n from del`;
  // Events are appended in time order, so the oldest by id are the oldest by time: take the
  // `limit` lowest ids (a walk of the primary key's left edge, however large the table) and
  // delete those past retention: at most `limit` rows read per pass, even when none is old yet.
  // An event stamped later than ones after it (a pinned clock) is kept until its own time comes,
  // taking one place of the batch meanwhile; it does not hold back the events behind it.
  const [events] = await sql`
    with oldest as (select id, at from worker.job_events order by id limit ${limit}),
    del as (
      delete from worker.job_events e using oldest o
       where e.id = o.id and o.at < coalesce(${now}::timestamptz, now()) - make_interval(secs => ${eventMs}::bigint / 1000.0)
      returning 1)
    select count(*)::int as n from del`;
  return { jobs: jobs!.n as number, events: events!.n as number };
}

/**
 * Open a stuck_job alert for each job whose current step has been running longer than the
 * threshold (default 2 h), and resolve the ones whose job has moved on.
 */
export async function alertStuckJobs(sql: Queryable, options: { thresholdMs?: number; now?: Date } = {}): Promise<{ opened: number; resolved: number }> {
  const now = options.now ?? null;
  const thresholdMs = options.thresholdMs ?? 2 * 3_600_000;
  const [opened] = await sql`
    with stuck as (
      select id, type, locked_by, claimed_at from worker.jobs
       where status = 'running' and claimed_at < coalesce(${now}::timestamptz, now()) - make_interval(secs => ${thresholdMs}::bigint / 1000.0)
    ), ins as (
      insert into worker.alerts (kind, key, job_id, message, detail, opened_at, last_seen_at)
      select 'stuck_job', id::text, id, 'job ' || id || ' (' || type || ') has been running since ' || claimed_at || ' on ' || coalesce(locked_by, '?'),
             jsonb_build_object('type', type, 'owner', locked_by, 'since', claimed_at),
             coalesce(${now}::timestamptz, now()), coalesce(${now}::timestamptz, now())
        from stuck
      on conflict (kind, key) where resolved_at is null
      do update set last_seen_at = excluded.last_seen_at, occurrences = worker.alerts.occurrences + 1
      returning (xmax = 0) as inserted
    )
    select count(*) filter (where inserted)::int as n from ins`;
  const [resolved] = await sql`
    with res as (
      update worker.alerts a set resolved_at = coalesce(${now}::timestamptz, now())
       where a.kind = 'stuck_job' and a.resolved_at is null
         and not exists (select 1 from worker.jobs j where j.id = a.job_id and j.status = 'running'
                           and j.claimed_at < coalesce(${now}::timestamptz, now()) - make_interval(secs => ${thresholdMs}::bigint / 1000.0))
      returning a.id)
    select count(*)::int as n from res`;
  return { opened: opened!.n as number, resolved: resolved!.n as number };
}

export interface UnclaimedAlertOptions {
  /** A job due for longer than this and still unclaimed is alerted (default 15 min). */
  thresholdMs?: number;
  /** At most this many waiting jobs read per pass (default 10,000). */
  limit?: number;
  now?: Date;
}

export interface UnclaimedAlertCounts {
  /** New unclaimed_jobs alerts (one per type and pool). */
  opened: number;
  /** Open ones seen again: their count and oldest job brought up to date. */
  refreshed: number;
  /** Closed: no job of their type and pool waits past the threshold any more. */
  resolved: number;
}

/**
 * Open one unclaimed_jobs alert per (type, pool) whose jobs have been due longer than the
 * threshold without a claim (no runner for the type or pool, a disabled or too small pool, too
 * few runners), and resolve the ones whose jobs were claimed, ended or rescheduled. Jobs that
 * wait by design (their concurrency key at its limit, or behind the active job of their dedupe
 * key) do not count. One bounded pass (worker.alert_unclaimed_jobs, migrations/0083).
 */
export async function alertUnclaimedJobs(sql: Queryable, options: UnclaimedAlertOptions = {}): Promise<UnclaimedAlertCounts> {
  try {
    const [row] = await sql`
      select * from worker.alert_unclaimed_jobs(${options.thresholdMs ?? 900_000}::bigint, ${options.limit ?? 10_000}::int,
                                                ${options.now ?? null}::timestamptz)`;
    return { opened: row!.opened as number, refreshed: row!.refreshed as number, resolved: row!.resolved as number };
  } catch (error) {
    throw translatePgError(error);
  }
}
