import { bulkFilterJson, type BulkFilter } from './bulk.ts';
import type { Queryable } from './db.ts';
import * as alerts from './driver/alerts.ts';
import * as driver from './driver/dashboard.ts';
import { translatePgError } from './errors.ts';
import type { DeadlineSeverity, Job, JobStatus } from './job.ts';

/** What the dashboard reads beyond inspect.ts: each a single short query. */

/**
 * Jobs by status, plus `due` (queued and due), `inProgress` (started and not finished: running,
 * or queued between steps) and `waiting` (those of them queued between steps).
 */
export type StatusCounts = Record<JobStatus, number> & { due: number; inProgress: number; waiting: number };

export async function countsByStatus(sql: Queryable, options: { now?: Date } = {}): Promise<StatusCounts> {
  const rows = await driver.jobCountsByStatus(sql);
  const due = await driver.dueJobCount(sql, options.now);
  const counts: StatusCounts = { queued: 0, running: 0, done: 0, failed: 0, cancelled: 0, oom_killed: 0, due, inProgress: 0, waiting: 0 };
  for (const r of rows) counts[r.status] = r.n;
  counts.waiting = rows.find((r) => r.status === 'queued')?.started ?? 0;
  counts.inProgress = counts.running + counts.waiting;
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
  return driver.depthSnapshotsSince(sql, sinceMs, options.now);
}

/** Every registered job type, sorted. */
export async function jobTypes(sql: Queryable): Promise<string[]> {
  return driver.registeredJobTypes(sql);
}

export interface OpenAlert {
  id: number;
  kind: string;
  key: string;
  severity: DeadlineSeverity;
  jobId: string | null;
  message: string;
  openedAt: Date;
  lastSeenAt: Date;
  notifiedAt: Date | null;
  occurrences: number;
}

/** The open alerts, newest first (at most 100). */
export async function openAlerts(sql: Queryable): Promise<OpenAlert[]> {
  return alerts.openAlerts(sql, 100);
}

export interface PastDeadline {
  /** Jobs past their deadline and not ended, in all. */
  total: number;
  /** The `limit` earliest deadlines among them. */
  jobs: Job[];
}

/** The jobs past their deadline that have not ended, the longest overdue first. */
export async function pastDeadlineJobs(sql: Queryable, options: { limit?: number; now?: Date } = {}): Promise<PastDeadline> {
  return driver.pastDeadlineJobs(sql, options.limit ?? 50, options.now);
}

/**
 * What a bulk retry or cancel would take now, the first `limit` by id (the oldest): the dry run's
 * sample. A filter the engine refuses is its SB400 (ValidationError naming the field).
 */
export async function bulkSample(sql: Queryable, op: 'retry' | 'cancel', filter: BulkFilter, options: { limit?: number } = {}): Promise<Job[]> {
  try {
    return await driver.bulkSampleRows(sql, op === 'retry' ? 'requeue' : 'cancel', bulkFilterJson(filter), options.limit ?? 10);
  } catch (error) {
    throw translatePgError(error);
  }
}
