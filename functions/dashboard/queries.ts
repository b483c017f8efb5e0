import { JOB_STATUSES, toJob, type Job, type JobStatus, type Queryable } from '../../queue/index.ts';

/** What the dashboard reads beyond queue/inspect.ts: each a single short query. */

export async function countsByStatus(sql: Queryable): Promise<Record<JobStatus, number> & { due: number }> {
  const rows = await sql`select status, count(*)::int as n from worker.jobs group by status`;
  const [due] = await sql`select count(*)::int as n from worker.jobs where status = 'queued' and run_at <= now()`;
  const counts = Object.fromEntries(JOB_STATUSES.map((s) => [s, 0])) as Record<JobStatus, number>;
  for (const r of rows) counts[r.status as JobStatus] = r.n as number;
  return { ...counts, due: due!.n as number };
}

export interface DepthPoint {
  at: Date;
  queued: number;
  due: number;
  running: number;
}

export async function depthSince(sql: Queryable, sinceMs: number): Promise<DepthPoint[]> {
  const rows = await sql`
    select at, queued, due, running from worker.depth_snapshots
     where at > now() - make_interval(secs => ${sinceMs}::bigint / 1000.0) order by at`;
  return rows.map((r) => ({ at: r.at as Date, queued: r.queued as number, due: r.due as number, running: r.running as number }));
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

export async function jobTypes(sql: Queryable): Promise<string[]> {
  return (await sql`select type from worker.job_types order by type`).map((r) => r.type as string);
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

export async function openAlerts(sql: Queryable): Promise<OpenAlert[]> {
  const rows = await sql`select * from worker.alerts where resolved_at is null order by opened_at desc, id desc limit 100`;
  return rows.map((r) => ({
    id: Number(r.id),
    kind: r.kind as string,
    key: r.key as string,
    jobId: (r.job_id as string | null) ?? null,
    message: r.message as string,
    openedAt: r.opened_at as Date,
    lastSeenAt: r.last_seen_at as Date,
    notifiedAt: (r.notified_at as Date | null) ?? null,
    occurrences: r.occurrences as number,
  }));
}

/** An operator's acknowledgement: the alert is resolved (a new occurrence opens a new alert). */
export async function resolveAlert(sql: Queryable, id: number): Promise<boolean> {
  return (await sql`update worker.alerts set resolved_at = now() where id = ${id} and resolved_at is null returning id`).length > 0;
}
