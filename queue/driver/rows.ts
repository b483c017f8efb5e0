import { DEADLINE_SEVERITIES, JOB_STATUSES, PARKED_MS, type DeadlineSeverity, type Job, type JobEvent, type JobStatus, type Json, type JsonObject } from '../job.ts';

/**
 * Rows of worker.* parsed once, here, into the engine's types: a row whose shape is not the
 * schema's (a migration and this file disagree) fails loudly at the driver instead of as a
 * wrong value far from it. Hand parsers, not zod: the claim path parses every claimed job.
 */

export class RowShapeError extends Error {
  constructor(what: string, column: string, value: unknown) {
    super(`${what}: column ${column} is ${JSON.stringify(value) ?? String(value)}, not what the schema says (migrations and queue/driver/ disagree)`);
    this.name = 'RowShapeError';
  }
}

/** The record behind a row (postgres.js row object, or a to_jsonb() value). */
export function record(row: unknown, what: string): Record<string, unknown> {
  if (typeof row !== 'object' || row === null || Array.isArray(row)) throw new RowShapeError(what, '*', row);
  return row as Record<string, unknown>;
}

export function text(value: unknown, column: string): string {
  if (typeof value !== 'string') throw new RowShapeError('row', column, value);
  return value;
}

export function textOrNull(value: unknown, column: string): string | null {
  return value === null || value === undefined ? null : text(value, column);
}

/** An int column; a bigint arrives as a string (postgres.js), a count as a number. */
export function int(value: unknown, column: string): number {
  const n = typeof value === 'string' && value !== '' ? Number(value) : value;
  if (typeof n !== 'number' || !Number.isFinite(n)) throw new RowShapeError('row', column, value);
  return n;
}

export function intOrNull(value: unknown, column: string): number | null {
  return value === null || value === undefined ? null : int(value, column);
}

export function bool(value: unknown, column: string): boolean {
  if (typeof value !== 'boolean') throw new RowShapeError('row', column, value);
  return value;
}

/**
 * A timestamptz: a Date from a row, a string from JSON. A parked job's run_at is 'infinity':
 * postgres.js gives it as an invalid Date, JSON as a string; both become the latest representable time.
 */
export function timeOrNull(value: unknown, column: string): Date | null {
  if (value === null || value === undefined) return null;
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? new Date(PARKED_MS) : value;
  if (value === 'infinity') return new Date(PARKED_MS);
  if (typeof value !== 'string') throw new RowShapeError('row', column, value);
  const at = new Date(value);
  if (Number.isNaN(at.getTime())) throw new RowShapeError('row', column, value);
  return at;
}

export function time(value: unknown, column: string): Date {
  const at = timeOrNull(value, column);
  if (at === null) throw new RowShapeError('row', column, value);
  return at;
}

/** A jsonb column as stored (already parsed by postgres.js). */
export function json(value: unknown): Json | null {
  return value === undefined ? null : (value as Json);
}

export function jsonObject(value: unknown, column: string): JsonObject {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new RowShapeError('row', column, value);
  return value as JsonObject;
}

export function jobStatus(value: unknown, column = 'status'): JobStatus {
  const status = JOB_STATUSES.find((s) => s === value);
  if (status === undefined) throw new RowShapeError('row', column, value);
  return status;
}

export function deadlineSeverityOrNull(value: unknown, column: string): DeadlineSeverity | null {
  if (value === null || value === undefined) return null;
  const severity = DEADLINE_SEVERITIES.find((s) => s === value);
  if (severity === undefined) throw new RowShapeError('row', column, value);
  return severity;
}

/**
 * worker.jobs' columns, in table order but for the row-held event ids below (which come before
 * the deadline's, added later): worker.settle_and_claim writes a claimed job in this order.
 */
export const JOB_COLUMNS = [
  'id', 'type', 'payload', 'status', 'priority', 'run_at', 'attempts', 'max_attempts', 'locked_until',
  'locked_by', 'lease_token', 'dedupe_key', 'submit_key', 'last_error', 'result', 'step', 'checkpoint',
  'pool', 'weight', 'running_pool', 'concurrency_key', 'concurrency_limit', 'cancel_requested_at',
  'cancel_reason', 'superseded_by', 'crashes', 'created_at', 'started_at', 'claimed_at', 'finished_at',
  'deadline_at', 'deadline_severity',
] as const;
/**
 * worker.jobs' last columns, not part of a Job: the ids of the enqueued, claimed and done events
 * the row holds (0160), which a job's history (worker.job_history) reads. A claimed job leaves
 * them out.
 */
export const ROW_HELD_EVENT_COLUMNS = ['claimed_event_id', 'done_event_id', 'enqueued_event_id'] as const;
/**
 * Columns a claimed job leaves out, as the step never needs them: the parent link (0200; the
 * child-ended trigger reads it from the row) and the claim's own rate and fairness keys (0210; the
 * rate-limited settle reads the key from the row). In table order.
 */
export const CLAIM_ONLY_COLUMNS = ['parent_id', 'rate_key', 'fair_key'] as const;
type JobColumn = (typeof JOB_COLUMNS)[number];

function jobFrom(get: (column: JobColumn) => unknown): Job {
  return {
    id: text(get('id'), 'id'),
    type: text(get('type'), 'type'),
    payload: jsonObject(get('payload'), 'payload'),
    status: jobStatus(get('status')),
    priority: int(get('priority'), 'priority'),
    runAt: time(get('run_at'), 'run_at'),
    attempts: int(get('attempts'), 'attempts'),
    maxAttempts: int(get('max_attempts'), 'max_attempts'),
    lockedUntil: timeOrNull(get('locked_until'), 'locked_until'),
    lockedBy: textOrNull(get('locked_by'), 'locked_by'),
    leaseToken: textOrNull(get('lease_token'), 'lease_token'),
    dedupeKey: textOrNull(get('dedupe_key'), 'dedupe_key'),
    submitKey: textOrNull(get('submit_key'), 'submit_key'),
    lastError: textOrNull(get('last_error'), 'last_error'),
    result: json(get('result')),
    step: text(get('step'), 'step'),
    checkpoint: get('checkpoint') == null ? {} : jsonObject(get('checkpoint'), 'checkpoint'),
    pool: textOrNull(get('pool'), 'pool'),
    weight: text(get('weight'), 'weight'),
    runningPool: textOrNull(get('running_pool'), 'running_pool'),
    concurrencyKey: textOrNull(get('concurrency_key'), 'concurrency_key'),
    concurrencyLimit: intOrNull(get('concurrency_limit'), 'concurrency_limit'),
    cancelRequestedAt: timeOrNull(get('cancel_requested_at'), 'cancel_requested_at'),
    cancelReason: textOrNull(get('cancel_reason'), 'cancel_reason'),
    supersededBy: textOrNull(get('superseded_by'), 'superseded_by'),
    crashes: int(get('crashes'), 'crashes'),
    createdAt: time(get('created_at'), 'created_at'),
    startedAt: timeOrNull(get('started_at'), 'started_at'),
    claimedAt: timeOrNull(get('claimed_at'), 'claimed_at'),
    finishedAt: timeOrNull(get('finished_at'), 'finished_at'),
    deadlineAt: timeOrNull(get('deadline_at'), 'deadline_at'),
    deadlineSeverity: deadlineSeverityOrNull(get('deadline_severity'), 'deadline_severity'),
  };
}

/** A worker.jobs row, or its to_jsonb() form, as a Job. */
export function parseJobRow(row: unknown): Job {
  const r = record(row, 'worker.jobs row');
  return jobFrom((column) => r[column]);
}

const COLUMN_INDEX = new Map<string, number>(JOB_COLUMNS.map((c, i) => [c, i]));

/** A claimed job as worker.settle_and_claim writes it: a positional array in JOB_COLUMNS order. */
export function parseClaimedJob(values: unknown): Job {
  if (!Array.isArray(values) || values.length !== JOB_COLUMNS.length) {
    const n = Array.isArray(values) ? values.length : typeof values;
    throw new Error(`settle_and_claim returned ${n} columns per job, expected ${JOB_COLUMNS.length}: migrations and queue/driver/rows.ts disagree`);
  }
  const row: readonly unknown[] = values;
  return jobFrom((column) => row[COLUMN_INDEX.get(column) ?? -1]);
}

export function parseJobEventRow(row: unknown): JobEvent {
  const r = record(row, 'worker.job_events row');
  return {
    id: int(r.id, 'id'),
    jobId: text(r.job_id, 'job_id'),
    at: time(r.at, 'at'),
    kind: text(r.kind, 'kind'),
    detail: jsonObject(r.detail, 'detail'),
  };
}
