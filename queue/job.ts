export const JOB_STATUSES = ['queued', 'running', 'done', 'failed', 'cancelled', 'oom_killed'] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];
export const TERMINAL_STATUSES: readonly JobStatus[] = ['done', 'failed', 'cancelled', 'oom_killed'];

/**
 * How loud a missed deadline is: 'critical' is the operations manual's P1 (page someone),
 * 'warning' a look during working hours. Alerts carry one too (every other kind is a warning).
 */
export const DEADLINE_SEVERITIES = ['warning', 'critical'] as const;
export type DeadlineSeverity = (typeof DEADLINE_SEVERITIES)[number];

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

/** A row of worker.jobs, camelCased. */
export interface Job {
  id: string;
  type: string;
  payload: JsonObject;
  status: JobStatus;
  priority: number;
  runAt: Date;
  attempts: number;
  maxAttempts: number;
  lockedUntil: Date | null;
  lockedBy: string | null;
  leaseToken: string | null;
  dedupeKey: string | null;
  submitKey: string | null;
  lastError: string | null;
  result: Json | null;
  step: string;
  checkpoint: JsonObject;
  pool: string | null;
  weight: string;
  runningPool: string | null;
  concurrencyKey: string | null;
  concurrencyLimit: number | null;
  cancelRequestedAt: Date | null;
  cancelReason: string | null;
  supersededBy: string | null;
  crashes: number;
  createdAt: Date;
  startedAt: Date | null;
  claimedAt: Date | null;
  finishedAt: Date | null;
  /** When the job should be done by (enqueue + its deadline, the job's own or its type's); null without one. */
  deadlineAt: Date | null;
  deadlineSeverity: DeadlineSeverity | null;
}

export interface JobEvent {
  id: number;
  jobId: string;
  at: Date;
  kind: string;
  detail: JsonObject;
}

const JOB_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Whether a string has a job id's shape (a UUID): checked before a lookup, so junk is "not found", not a cast error. */
export function isJobId(value: string): boolean {
  return JOB_ID.test(value);
}

/** run_at of a job parked until resumed ('infinity' in Postgres). */
export const PARKED_MS = 8.64e15;
