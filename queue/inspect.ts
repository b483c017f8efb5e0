import type { Queryable } from './db.ts';
import { depthByStatusAndType, eventsOf, inProgressJobRows, jobById, jobPage, runningJobRows } from './driver/jobs.ts';
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
  /** Only jobs in progress (true) or only those not (false): queue/progress.ts's isInProgress. */
  inProgress?: boolean;
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
  const rows = await jobPage(sql, { status: options.status, type: options.type, inProgress: options.inProgress, beforeId: after?.id }, limit + 1);
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

export interface InProgressJob {
  id: string;
  type: string;
  /** running, or queued between steps (or for a retry of the current step). */
  status: JobStatus;
  step: string;
  /** The running step's owner; null while the job waits. */
  owner: string | null;
  /** How long the current step has run; null while the job waits. */
  runningForMs: number | null;
  /** When the next step (or retry) is due while the job waits; null while running or parked. */
  nextStepAt: Date | null;
  /** Failures of the current step (queue/progress.ts). */
  failures: number;
}

/** Jobs started and not finished: running ones oldest step first, then waiting ones next due first; at most `limit`. */
export async function inProgressJobs(sql: Queryable, options: { limit?: number; now?: Date } = {}): Promise<InProgressJob[]> {
  return inProgressJobRows(sql, options.limit ?? 50, options.now);
}
