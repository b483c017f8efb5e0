import type { Queryable } from '../db.ts';
import type { DepthPoint } from '../dashboard-read.ts';
import type { Job, JobStatus, JsonObject } from '../job.ts';
import { parseJobRow } from './rows.ts';
import { at } from './clock.ts';

/** The dashboard's reads of worker.jobs, worker.job_types, worker.depth_snapshots and worker.step_minutes: each a single short query. */

/** Jobs by status, and how many of each have started (statuses with none absent). */
export async function jobCountsByStatus(sql: Queryable): Promise<{ status: JobStatus; n: number; started: number }[]> {
  return sql<{ status: JobStatus; n: number; started: number }[]>`
    select status, count(*)::int as n, count(*) filter (where started_at is not null)::int as started from worker.jobs group by status`;
}

/** Queued jobs due at `now` (the database's now() when undefined). */
export async function dueJobCount(sql: Queryable, now: Date | undefined): Promise<number> {
  const [row] = await sql<{ n: number }[]>`
    select count(*)::int as n from worker.jobs where status = 'queued' and run_at <= ${at(sql, now)}`;
  return row?.n ?? 0;
}

/** The depth snapshots of the last `sinceMs`, oldest first. */
export async function depthSnapshotsSince(sql: Queryable, sinceMs: number, now: Date | undefined): Promise<DepthPoint[]> {
  const rows = await sql<DepthPoint[]>`
    select at, queued, due, running from worker.depth_snapshots
     where at > ${at(sql, now)} - make_interval(secs => ${sinceMs}::bigint / 1000.0) order by at`;
  return rows.map((r) => ({ at: r.at, queued: r.queued, due: r.due, running: r.running }));
}

/** Every registered job type, sorted. */
export async function registeredJobTypes(sql: Queryable): Promise<string[]> {
  return (await sql<{ type: string }[]>`select type from worker.job_types order by type`).map((r) => r.type);
}

/** Jobs past their deadline and not ended (a range of jobs_deadline_idx): the count, and the `limit` longest overdue. */
export async function pastDeadlineJobs(sql: Queryable, limit: number, now: Date | undefined): Promise<{ total: number; jobs: Job[] }> {
  const [[count], rows] = await Promise.all([
    sql<{ n: number }[]>`
      select count(*)::int as n from worker.jobs
       where deadline_at <= ${at(sql, now)} and deadline_at is not null and status in ('queued', 'running')`,
    sql`
      select * from worker.jobs
       where deadline_at <= ${at(sql, now)} and deadline_at is not null and status in ('queued', 'running')
       order by deadline_at, id limit ${limit}`,
  ]);
  return { total: count?.n ?? 0, jobs: rows.map(parseJobRow) };
}

/**
 * The first `limit` jobs, by id, a bulk operation's filter takes now: the filter is read by
 * worker.job_filter_of and the set chosen by worker.job_filter_next_ids, the same functions the
 * operation's batches use, so the sample is of what a confirm would change.
 */
export async function bulkSampleRows(sql: Queryable, op: 'requeue' | 'cancel', filter: JsonObject, limit: number): Promise<Job[]> {
  const rows = await sql`
    select j.* from worker.jobs j
     where j.id in (select worker.job_filter_next_ids(worker.job_filter_of(${sql.json(filter)}::jsonb, ${op}::text), null, ${limit}::int))
     order by j.id`;
  return rows.map(parseJobRow);
}

export interface StepMinuteRow {
  type: string;
  /** The start of the bin (`binMinutes` wide) the steps ended in. */
  at: Date;
  outcome: string;
  bucket: number;
  steps: number;
  seconds: number;
}

/** worker.step_minutes since `sinceMs` ago, summed into bins of `binMinutes` (a range of its primary key). */
export async function stepMinuteRows(sql: Queryable, sinceMs: number, binMinutes: number, now: Date | undefined): Promise<StepMinuteRow[]> {
  const rows = await sql<{ type: string; at: Date; outcome: string; bucket: number; steps: string; seconds: number }[]>`
    with w as (select ${at(sql, now)} - make_interval(secs => ${sinceMs}::bigint / 1000.0) as since)
    select m.type, date_bin(make_interval(mins => ${binMinutes}::int), m.minute, w.since) as at, m.outcome, m.bucket,
           sum(m.steps)::bigint as steps, sum(m.seconds)::float8 as seconds
      from worker.step_minutes m, w
     where m.minute >= w.since
     group by 1, 2, 3, 4
     order by 2`;
  return rows.map((r) => ({ type: r.type, at: r.at, outcome: r.outcome, bucket: r.bucket, steps: Number(r.steps), seconds: r.seconds }));
}

/** The step duration histogram's upper bounds, seconds (worker.step_duration_bounds()). */
export async function stepDurationBounds(sql: Queryable): Promise<number[]> {
  return (await sql<{ le: number }[]>`select unnest(worker.step_duration_bounds()) as le`).map((r) => Number(r.le));
}
