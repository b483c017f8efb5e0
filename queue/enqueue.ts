import type { Queryable } from './db.ts';
import { translatePgError, ValidationError } from './errors.ts';
import { enqueueRow, enqueueRows } from './driver/enqueue.ts';
import { typeAccessRows } from './driver/job-types.ts';
import type { DeadlineSeverity, Job, JsonObject } from './job.ts';
import type { TypeRateLimit as RateLimit } from './flow-types.ts';
import type { JobAccess } from './registry.ts';

export interface EnqueueInput {
  type: string;
  payload?: JsonObject;
  /** Lower runs first: 10 urgent, 50 normal (default), 100 low. */
  priority?: number;
  runAt?: Date;
  delayMs?: number;
  maxAttempts?: number;
  /** Debounce: a new job supersedes the waiting job of the same key. */
  dedupeKey?: string;
  /** Idempotent submit: the same key returns the existing job. */
  submitKey?: string;
  pool?: string;
  weight?: string;
  concurrencyKey?: string;
  concurrencyLimit?: number;
  /**
   * Done within this long of enqueue (1 ms to 30 days), or the leader's tick opens a
   * deadline_missed alert for the job. Overrides the type's deadlineMs.
   */
  deadlineMs?: number;
  /** The alert's severity (default: the type's, else 'warning'). Needs a deadline, the job's or its type's. */
  deadlineSeverity?: DeadlineSeverity;
  /**
   * This job's rate limit, over its type's (docs/engine.md, "Flow control"): no more than `limit`
   * steps of the key's jobs start in any window of `per`. A key holds one limit: naming an
   * existing key with another limit or window is a ConflictError (SB409), nothing written.
   */
  rateLimit?: RateLimit;
  /** This job's fairness key (literal text), over its type's: claims take due jobs round-robin across keys. */
  fairnessKey?: string;
}

export interface EnqueueResult {
  job: Job;
  /** True when submitKey matched an earlier identical request: `job` is that earlier job. */
  duplicate: boolean;
  /** The waiting job this one superseded (same dedupeKey), if any. */
  superseded: string | null;
}

export interface ClockOption {
  /** Pinned time for tests; the database clock when absent. */
  now?: Date;
}

/**
 * Enqueue one job. Pass a transaction (`sql.begin(tx => enqueue(tx, …))`) to make the job exist
 * iff the caller's transaction commits.
 */
export async function enqueue(sql: Queryable, input: EnqueueInput, options: ClockOption = {}): Promise<EnqueueResult> {
  checkDeadlineMs(input.deadlineMs, 'deadlineMs');
  try {
    return await enqueueRow(sql, input, options.now);
  } catch (error) {
    throw translatePgError(error);
  }
}

/** Enqueue many jobs in one round trip, all or nothing. */
export async function enqueueBatch(sql: Queryable, inputs: EnqueueInput[], options: ClockOption = {}): Promise<EnqueueResult[]> {
  if (inputs.length === 0) return [];
  inputs.forEach((input, i) => checkDeadlineMs(input.deadlineMs, `jobs[${i}].deadlineMs`));
  try {
    return await enqueueRows(sql, inputs, options.now);
  } catch (error) {
    throw translatePgError(error);
  }
}

/**
 * A fractional deadlineMs would reach the single enqueue's bigint argument as a cast error; the
 * range (and everything else) the SQL enqueue checks, for every caller alike.
 */
function checkDeadlineMs(value: number | undefined, field: string): void {
  if (value !== undefined && !Number.isSafeInteger(value)) {
    throw new ValidationError(`deadlineMs must be an integer number of milliseconds, got ${String(value)}`, field);
  }
}

export interface TypeAccess {
  access: JobAccess;
  /** How an internal type is meant to be enqueued (its route, its schedule, its parent job). */
  enqueueVia: string | null;
}

/**
 * Who may enqueue each of `types` over the generic routes, as the registry sync stored it
 * (worker.job_types). A type not in the table is left out: enqueue refuses it as unknown.
 */
export async function typeAccess(sql: Queryable, types: readonly string[]): Promise<Map<string, TypeAccess>> {
  const distinct = [...new Set(types)];
  if (distinct.length === 0) return new Map();
  return typeAccessRows(sql, distinct);
}
