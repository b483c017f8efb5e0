import type { Queryable, Sql, TransactionSql } from './db.ts';
import { extendLease, markCancelled, markContinued, markDone, markFailed, markRetried, releaseOwnLease as releaseLeaseRow } from './driver/settle.ts';
import type { Job, Json, JsonObject } from './job.ts';

export { completionsJson } from './driver/settle.ts';

/**
 * Settling a step: every statement (queue/driver/settle.ts) is fenced by the job's lease token
 * and `running` status, so an owner that lost its lease (0 rows) can never overwrite someone
 * else's work.
 */

/** Work done in the same transaction as a settle, only if the fence held (e.g. write desired state). */
export type SettleEffect = (tx: TransactionSql) => Promise<unknown>;

export interface SettleOptions {
  now?: Date;
  effect?: SettleEffect;
}

type Fenced = Pick<Job, 'id' | 'leaseToken'>;

async function fenced(sql: Sql, effect: SettleEffect | undefined, statement: (q: Queryable) => Promise<boolean>): Promise<boolean> {
  if (!effect) return statement(sql);
  return sql.begin(async (tx) => {
    if (!(await statement(tx))) return false;
    await effect(tx);
    return true;
  });
}

export interface HeartbeatResult {
  /** False when the lease was lost: the step must stop and not settle. */
  owned: boolean;
  cancelRequested: boolean;
  lockedUntil: Date | null;
}

/** Extend the lease of a job still owned, by its type's lease length. */
export async function heartbeat(sql: Queryable, job: Fenced, options: { now?: Date } = {}): Promise<HeartbeatResult> {
  const lease = await extendLease(sql, job, options.now);
  if (!lease) return { owned: false, cancelRequested: false, lockedUntil: null };
  return { owned: true, ...lease };
}

/** done: the result is stored once (the fence makes a second completion match nothing). */
export async function completeJob(sql: Sql, job: Fenced, result: Json | undefined, options: SettleOptions = {}): Promise<boolean> {
  return fenced(sql, options.effect, async (q) => (await markDone(q, [{ job, result }], options.now)).has(job.id));
}

export interface Completion {
  job: Fenced;
  result?: Json;
}

/**
 * done for many jobs in one statement (one round trip, one commit): each row is fenced by its own
 * lease token exactly as in completeJob, and gets its own `done` event. Returns the ids whose
 * fence held; a job missing from it lost its lease and was not touched.
 */
export async function completeJobs(sql: Queryable, completions: Completion[], options: { now?: Date } = {}): Promise<Set<string>> {
  if (completions.length === 0) return new Set();
  return markDone(sql, completions, options.now);
}

export interface ContinueInput {
  /** The next step's name. */
  step: string;
  /** State for later steps, merged into the checkpoint. */
  checkpoint?: JsonObject;
  /** When the next step may run; null parks the job until an operator or API resumes it. */
  delayMs?: number | null;
}

/**
 * continue: checkpoint saved, job back to queued after `delayMs`, lease released. A successful
 * step does not use up an attempt: attempts count consecutive failures of the current step.
 * A pending cancel request makes the job due at once, so its cancel hook runs next.
 */
export async function continueJob(sql: Sql, job: Fenced, next: ContinueInput, options: SettleOptions = {}): Promise<boolean> {
  return fenced(sql, options.effect, (q) => markContinued(q, job, next, options.now));
}

export type RetryOutcome = 'queued' | 'failed' | 'lost';

/**
 * retry: back to queued after `delayMs` while attempts < max_attempts; otherwise failed with
 * last_error and an open poison_job alert (same statement).
 */
export async function retryJob(
  sql: Queryable,
  job: Fenced,
  error: string,
  delayMs: number,
  options: { now?: Date; /** a pending cancel makes the retry due at once (default) */ cancelDueNow?: boolean } = {},
): Promise<RetryOutcome> {
  return markRetried(sql, job, error, delayMs, options.cancelDueNow ?? true, options.now);
}

/** failed at once (a permanent error: retrying cannot help), with a poison_job alert. */
export async function failJob(sql: Queryable, job: Fenced, error: string, options: { now?: Date } = {}): Promise<boolean> {
  return markFailed(sql, job, error, options.now);
}

/** cancelled: the running job's cancel hook has run; the job ends here. */
export async function settleCancelled(sql: Sql, job: Fenced, options: SettleOptions = {}): Promise<boolean> {
  return fenced(sql, options.effect, (q) => markCancelled(q, job, options.now));
}

/** Give the lease back without using up the attempt, so the job is claimable at once (graceful shutdown). */
export async function releaseOwnLease(sql: Queryable, job: Fenced, reason: string, options: { now?: Date } = {}): Promise<boolean> {
  return releaseLeaseRow(sql, job, reason, options.now);
}
