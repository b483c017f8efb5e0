import type { Queryable } from '../db.ts';
import type { DepthPoint } from '../dashboard-read.ts';
import type { Job, JobStatus } from '../job.ts';
import { inProgressCondition } from './jobs.ts';
import { parseJobRow } from './rows.ts';
import { at } from './clock.ts';

/** The dashboard's reads of worker.jobs, worker.job_types and worker.depth_snapshots: each a single short query. */

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

/** The newest jobs, optionally of one status and type, and only those in progress. */
export async function newestJobs(sql: Queryable, filter: { status?: JobStatus; type?: string; inProgress?: boolean; limit: number }): Promise<Job[]> {
  const rows = await sql`
    select * from worker.jobs
     where true
       ${filter.status ? sql`and status = ${filter.status}` : sql``}
       ${filter.type ? sql`and type = ${filter.type}` : sql``}
       ${filter.inProgress ? sql`and ${inProgressCondition(sql)}` : sql``}
     order by id desc  -- ids are UUIDv7: newest first, on the primary key
     limit ${filter.limit}`;
  return rows.map(parseJobRow);
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
