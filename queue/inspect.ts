import type { Queryable } from './db.ts';
import { depthByStatusAndType, eventsOf, jobById, jobPage, runningJobRows } from './driver/jobs.ts';
import { isJobId, type Job, type JobEvent, type JobStatus } from './job.ts';

/** Read-side queries shared by the HTTP API, the CLI and the dashboard. */

export async function getJob(sql: Queryable, id: string): Promise<{ job: Job; events: JobEvent[] } | null> {
  if (!isJobId(id)) return null;
  const job = await jobById(sql, id);
  if (!job) return null;
  return { job, events: await eventsOf(sql, id) };
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
  const rows = await jobPage(sql, { status: options.status, type: options.type, beforeId: after?.id }, limit + 1);
  const jobs = rows.slice(0, limit);
  const last = jobs[jobs.length - 1];
  return { jobs, nextCursor: rows.length > limit && last ? encodeCursor(last) : null };
}

export interface QueueDepth {
  status: JobStatus;
  type: string;
  count: number;
}

export async function queueDepth(sql: Queryable): Promise<QueueDepth[]> {
  return depthByStatusAndType(sql);
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
  return runningJobRows(sql, options.olderThanMs, options.now);
}
