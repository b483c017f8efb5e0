import { retryContended } from './database-errors.ts';
import type { Sql } from './db.ts';
import { type BulkBatchRow, bulkCalls as call } from './driver/bulk.ts';
import { translatePgError, ValidationError } from './errors.ts';
import type { JobStatus, JsonObject } from './job.ts';

/**
 * Retry or cancel every job a filter takes (worker.bulk_requeue, worker.bulk_cancel): the single
 * operations (worker.requeue_job, worker.cancel_job) applied job by job, a batch of `batchSize`
 * per SQL call, each call its own short transaction; a job whose state moved on between the
 * batch's choice and its lock is skipped. `dryRun` counts and changes nothing. Without `maxJobs`
 * the whole set is walked; with it, the walk stops after the batch that reaches it and answers
 * `nextCursor` to go on from (an HTTP request has a budget; the CLI walks the whole set).
 */

export interface BulkFilter {
  type?: string;
  status?: JobStatus | JobStatus[];
  /** created at or after */
  createdAfter?: Date | string;
  /** created before */
  createdBefore?: Date | string;
  finishedAfter?: Date | string;
  finishedBefore?: Date | string;
  /** worker.error_fingerprint of last_error: 16 hex digits, as deadLetters() shows */
  fingerprint?: string;
  /** no criterion: every job the operation may take (an empty filter is refused without it) */
  all?: true;
}

export interface BulkOptions {
  dryRun?: boolean;
  /** jobs per SQL call (one transaction each): 1 to 10,000, default 500 */
  batchSize?: number;
  /** stop after the batch that reaches this many jobs and answer nextCursor */
  maxJobs?: number;
  /** go on from a nextCursor an earlier call answered */
  cursor?: string | null;
  now?: Date;
}

export interface BulkRequeueResult {
  dryRun: boolean;
  /** jobs the filter took (a dry run: all it takes now) */
  matched: number;
  requeued: number;
  /** moved on before their turn (or another job holds their dedupe key): left as they are */
  skipped: number;
  batches: number;
  /** null: the set is done */
  nextCursor: string | null;
}

export interface BulkCancelResult extends Omit<BulkRequeueResult, 'requeued'> {
  /** never started: cancelled at once */
  cancelled: number;
  /** started: cancel requested, the hook runs at the job's next step */
  cancelRequested: number;
}

export const DEFAULT_BULK_BATCH = 500;
/**
 * Tries of one batch that meets contention (a deadlock with a runner or another operator, a
 * serialization failure, a lock timeout) before the walk gives up with that error: with the
 * engine's backoff (50 ms doubling to 2 s, jittered) 8 tries wait about 5 s in all, long enough
 * to outlast the transactions it met, short enough that an operator learns of a lock that is not
 * going away.
 */
export const BULK_BATCH_TRIES = 8;

/** A filter as the SQL functions take it (worker.job_filter_of): times as ISO text, absent fields left out. */
export function bulkFilterJson(filter: BulkFilter): JsonObject {
  const out: JsonObject = {};
  for (const [key, value] of Object.entries(filter)) {
    if (value === undefined) continue;
    out[key] = value instanceof Date ? value.toISOString() : (value as JsonObject[string]);
  }
  return out;
}

interface Walked {
  matched: number;
  applied: number;
  requested: number;
  skipped: number;
  batches: number;
  nextCursor: string | null;
}

async function walk(options: BulkOptions, call: (limit: number, after: string | null) => Promise<BulkBatchRow>): Promise<Walked> {
  // Each batch is its own transaction: one that failed with contention wrote nothing, so the
  // same batch (same cursor) is run again; the batches before it stay done.
  const batch = (limit: number, after: string | null) => retryContended(() => call(limit, after), { tries: BULK_BATCH_TRIES });
  const limit = options.batchSize ?? DEFAULT_BULK_BATCH;
  if (!Number.isInteger(limit) || limit < 1 || limit > 10_000) throw new ValidationError('batchSize must be an integer from 1 to 10000', 'batchSize');
  const total: Walked = { matched: 0, applied: 0, requested: 0, skipped: 0, batches: 0, nextCursor: options.cursor ?? null };
  try {
    if (options.dryRun) {
      const counted = await batch(limit, null);
      return { ...total, matched: counted.matched, nextCursor: null };
    }
    do {
      const b = await batch(limit, total.nextCursor);
      total.matched += b.matched;
      total.applied += b.applied;
      total.requested += b.requested;
      total.skipped += b.skipped;
      total.batches += 1;
      total.nextCursor = b.nextAfter;
    } while (total.nextCursor !== null && (options.maxJobs === undefined || total.matched < options.maxJobs));
    return total;
  } catch (error) {
    throw translatePgError(error);
  }
}

/** Requeue every failed, cancelled or oom_killed job the filter takes (each as requeueJob would). */
export async function bulkRequeue(sql: Sql, filter: BulkFilter, options: BulkOptions = {}): Promise<BulkRequeueResult> {
  const json = bulkFilterJson(filter);
  const w = await walk(options, (limit, after) => call.requeue(sql, json, options.dryRun ?? false, limit, after, options.now));
  return { dryRun: options.dryRun ?? false, matched: w.matched, requeued: w.applied, skipped: w.skipped, batches: w.batches, nextCursor: w.nextCursor };
}

/** Cancel every queued or running job the filter takes (each as cancelJob would). */
export async function bulkCancel(sql: Sql, filter: BulkFilter, options: BulkOptions & { reason?: string } = {}): Promise<BulkCancelResult> {
  const json = bulkFilterJson(filter);
  const reason = options.reason ?? 'cancelled in bulk by operator';
  const w = await walk(options, (limit, after) => call.cancel(sql, json, options.dryRun ?? false, reason, limit, after, options.now));
  return {
    dryRun: options.dryRun ?? false, matched: w.matched, cancelled: w.applied, cancelRequested: w.requested, skipped: w.skipped,
    batches: w.batches, nextCursor: w.nextCursor,
  };
}
