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
  /** Only jobs holding this submit key or dedupe key (each an index). */
  key?: string;
  /**
   * Only jobs whose payload at `path` (top-level field, or a nested one) is `value` as text. No
   * index serves it: the query scans the primary key newest first, so pair it with `createdWithinMs`.
   */
  payload?: { path: string[]; value: string };
  /** Only jobs created in the last this long (UUIDv7 ids: a range of the primary key). */
  createdWithinMs?: number;
  now?: Date;
}

/**
 * The smallest UUIDv7 of the millisecond `at`: every job created at or after `at` has an id at or
 * above it, so a time floor is a primary-key range.
 */
export function firstIdAt(at: Date): string {
  const hex = Math.max(0, Math.floor(at.getTime())).toString(16).padStart(12, '0');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-7000-8000-000000000000`;
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
  const sinceId = options.createdWithinMs === undefined ? undefined : firstIdAt(new Date((options.now ?? new Date()).getTime() - options.createdWithinMs));
  const rows = await jobPage(sql, {
    status: options.status, type: options.type, inProgress: options.inProgress, key: options.key, payload: options.payload, beforeId: after?.id, sinceId,
  }, limit + 1);
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
  /** The last error the job recorded (unscrubbed: the caller scrubs what it shows). */
  lastError: string | null;
}

/** Jobs started and not finished: running ones oldest step first, then waiting ones next due first; at most `limit`. */
export async function inProgressJobs(sql: Queryable, options: { limit?: number; now?: Date } = {}): Promise<InProgressJob[]> {
  return inProgressJobRows(sql, options.limit ?? 50, options.now);
}
