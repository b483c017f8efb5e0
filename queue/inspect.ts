import type { Queryable } from './db.ts';
import { isJobId, toJob, toJobEvent, type Job, type JobEvent, type JobStatus } from './job.ts';

/** Read-side queries shared by the HTTP API, the CLI and the dashboard. */

export async function getJob(sql: Queryable, id: string): Promise<{ job: Job; events: JobEvent[] } | null> {
  if (!isJobId(id)) return null;
  const [row] = await sql`select * from worker.jobs where id = ${id}`;
  if (!row) return null;
  const events = await sql`select * from worker.job_events where job_id = ${id} order by id`;
  return { job: toJob(row), events: events.map(toJobEvent) };
}

export interface ListJobsOptions {
  status?: JobStatus;
  type?: string;
  limit?: number;
  /** Opaque cursor from the previous page. */
  cursor?: string;
}

/**
 * A cursor is the id of the last row seen, base64url-encoded. Job ids are UUIDv7 (creation time
 * first), so id order is creation order and the primary key serves the listing.
 */
export function encodeCursor(job: Pick<Job, 'id'>): string {
  return Buffer.from(JSON.stringify([job.id])).toString('base64url');
}

export function decodeCursor(cursor: string): { id: string } | null {
  try {
    const value: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (!Array.isArray(value) || value.length !== 1 || typeof value[0] !== 'string' || !isJobId(value[0])) return null;
    return { id: value[0] };
  } catch {
    return null;
  }
}

/** Newest first, keyset-paginated on id (time-ordered). */
export async function listJobs(sql: Queryable, options: ListJobsOptions = {}): Promise<{ jobs: Job[]; nextCursor: string | null }> {
  const limit = Math.min(Math.max(options.limit ?? 50, 1), 500);
  const after = options.cursor ? decodeCursor(options.cursor) : null;
  const rows = await sql`
    select * from worker.jobs
     where true
       ${options.status ? sql`and status = ${options.status}` : sql``}
       ${options.type ? sql`and type = ${options.type}` : sql``}
       ${after ? sql`and id < ${after.id}::uuid` : sql``}
     order by id desc
     limit ${limit + 1}`;
  const jobs = rows.slice(0, limit).map(toJob);
  return { jobs, nextCursor: rows.length > limit ? encodeCursor(jobs[jobs.length - 1]!) : null };
}

export interface QueueDepth {
  status: JobStatus;
  type: string;
  count: number;
}

export async function queueDepth(sql: Queryable): Promise<QueueDepth[]> {
  const rows = await sql`select status, type, count(*)::int as count from worker.jobs group by status, type order by status, type`;
  return rows.map((r) => ({ status: r.status as JobStatus, type: r.type as string, count: r.count as number }));
}

export interface RunningJob {
  id: string;
  type: string;
  step: string;
  owner: string | null;
  runningForMs: number;
  lockedUntil: Date | null;
}

/** Running jobs with owner and age (of the current step), oldest first; `olderThanMs` for stuck ones. */
export async function runningJobs(sql: Queryable, options: { olderThanMs?: number; now?: Date } = {}): Promise<RunningJob[]> {
  const rows = await sql`
    select id, type, step, locked_by, locked_until,
           (extract(epoch from coalesce(${options.now ?? null}::timestamptz, now()) - claimed_at) * 1000)::bigint as age_ms
      from worker.jobs
     where status = 'running'
       ${options.olderThanMs !== undefined ? sql`and claimed_at < coalesce(${options.now ?? null}::timestamptz, now()) - make_interval(secs => ${options.olderThanMs}::bigint / 1000.0)` : sql``}
     order by claimed_at`;
  return rows.map((r) => ({
    id: r.id as string,
    type: r.type as string,
    step: r.step as string,
    owner: r.locked_by as string | null,
    runningForMs: Number(r.age_ms),
    lockedUntil: r.locked_until as Date | null,
  }));
}
