export const JOB_STATUSES = ['queued', 'running', 'done', 'failed', 'cancelled', 'oom_killed'] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];
export const TERMINAL_STATUSES: readonly JobStatus[] = ['done', 'failed', 'cancelled', 'oom_killed'];

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
}

export interface JobEvent {
  id: number;
  jobId: string;
  at: Date;
  kind: string;
  detail: JsonObject;
}

type Row = Record<string, unknown>;

const JOB_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Whether a string has a job id's shape (a UUID): checked before a lookup, so junk is "not found", not a cast error. */
export function isJobId(value: string): boolean {
  return JOB_ID.test(value);
}

/** run_at of a job parked until resumed ('infinity' in Postgres). */
export const PARKED_MS = 8.64e15;

function date(value: unknown): Date | null {
  if (value === null || value === undefined) return null;
  // A parked job's run_at is 'infinity': postgres.js gives it as an invalid Date, JSON as a
  // string; both become the latest representable time.
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? new Date(PARKED_MS) : value;
  if (value === 'infinity') return new Date(PARKED_MS);
  return new Date(String(value));
}

/** Maps a worker.jobs row, or its to_jsonb() form, to a Job. */
export function toJob(row: Row): Job {
  return {
    id: row.id as string,
    type: row.type as string,
    payload: row.payload as JsonObject,
    status: row.status as JobStatus,
    priority: row.priority as number,
    runAt: date(row.run_at)!,
    attempts: row.attempts as number,
    maxAttempts: row.max_attempts as number,
    lockedUntil: date(row.locked_until),
    lockedBy: (row.locked_by as string | null) ?? null,
    leaseToken: (row.lease_token as string | null) ?? null,
    dedupeKey: (row.dedupe_key as string | null) ?? null,
    submitKey: (row.submit_key as string | null) ?? null,
    lastError: (row.last_error as string | null) ?? null,
    result: (row.result as Json) ?? null,
    step: row.step as string,
    checkpoint: (row.checkpoint as JsonObject) ?? {},
    pool: (row.pool as string | null) ?? null,
    weight: row.weight as string,
    runningPool: (row.running_pool as string | null) ?? null,
    concurrencyKey: (row.concurrency_key as string | null) ?? null,
    concurrencyLimit: (row.concurrency_limit as number | null) ?? null,
    cancelRequestedAt: date(row.cancel_requested_at),
    cancelReason: (row.cancel_reason as string | null) ?? null,
    supersededBy: (row.superseded_by as string | null) ?? null,
    crashes: row.crashes as number,
    createdAt: date(row.created_at)!,
    startedAt: date(row.started_at),
    claimedAt: date(row.claimed_at),
    finishedAt: date(row.finished_at),
  };
}

export function toJobEvent(row: Row): JobEvent {
  return {
    id: Number(row.id),
    jobId: row.job_id as string,
    at: date(row.at)!,
    kind: row.kind as string,
    detail: row.detail as JsonObject,
  };
}
