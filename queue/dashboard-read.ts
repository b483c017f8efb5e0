import type { Queryable } from './db.ts';
import { toJob, type Job, type JobStatus } from './job.ts';

/** What the dashboard reads beyond inspect.ts: each a single short query. */

export type StatusCounts = Record<JobStatus, number> & { due: number };

export async function countsByStatus(sql: Queryable, options: { now?: Date } = {}): Promise<StatusCounts> {
  const rows = await sql<{ status: JobStatus; n: number }[]>`select status, count(*)::int as n from worker.jobs group by status`;
  const [due] = await sql<{ n: number }[]>`
    select count(*)::int as n from worker.jobs where status = 'queued' and run_at <= coalesce(${options.now ?? null}::timestamptz, now())`;
  const counts: StatusCounts = { queued: 0, running: 0, done: 0, failed: 0, cancelled: 0, oom_killed: 0, due: due?.n ?? 0 };
  for (const r of rows) counts[r.status] = r.n;
  return counts;
}

export interface DepthPoint {
  at: Date;
  queued: number;
  due: number;
  running: number;
}

/** The depth snapshots of the last `sinceMs`, oldest first. */
export async function depthSince(sql: Queryable, sinceMs: number, options: { now?: Date } = {}): Promise<DepthPoint[]> {
  const rows = await sql<DepthPoint[]>`
    select at, queued, due, running from worker.depth_snapshots
     where at > coalesce(${options.now ?? null}::timestamptz, now()) - make_interval(secs => ${sinceMs}::bigint / 1000.0) order by at`;
  return rows.map((r) => ({ at: r.at, queued: r.queued, due: r.due, running: r.running }));
}

export async function recentJobs(sql: Queryable, filter: { status?: JobStatus; type?: string; limit?: number }): Promise<Job[]> {
  const rows = await sql`
    select * from worker.jobs
     where true
       ${filter.status ? sql`and status = ${filter.status}` : sql``}
       ${filter.type ? sql`and type = ${filter.type}` : sql``}
     order by id desc  -- ids are UUIDv7: newest first, on the primary key
     limit ${filter.limit ?? 25}`;
  return rows.map(toJob);
}

/** Every registered job type, sorted. */
export async function jobTypes(sql: Queryable): Promise<string[]> {
  return (await sql<{ type: string }[]>`select type from worker.job_types order by type`).map((r) => r.type);
}

export interface OpenAlert {
  id: number;
  kind: string;
  key: string;
  jobId: string | null;
  message: string;
  openedAt: Date;
  lastSeenAt: Date;
  notifiedAt: Date | null;
  occurrences: number;
}

interface AlertRow {
  id: string | number;
  kind: string;
  key: string;
  job_id: string | null;
  message: string;
  opened_at: Date;
  last_seen_at: Date;
  notified_at: Date | null;
  occurrences: number;
}

/** The open alerts, newest first (at most 100). */
export async function openAlerts(sql: Queryable): Promise<OpenAlert[]> {
  const rows = await sql<AlertRow[]>`
    select id, kind, key, job_id, message, opened_at, last_seen_at, notified_at, occurrences
      from worker.alerts where resolved_at is null order by opened_at desc, id desc limit 100`;
  return rows.map((r) => ({
    id: Number(r.id),
    kind: r.kind,
    key: r.key,
    jobId: r.job_id ?? null,
    message: r.message,
    openedAt: r.opened_at,
    lastSeenAt: r.last_seen_at,
    notifiedAt: r.notified_at ?? null,
    occurrences: r.occurrences,
  }));
}
