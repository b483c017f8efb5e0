import type { Queryable } from './db.ts';
import { retryContended } from './database-errors.ts';
import { claimRows, settleAndClaimRows } from './driver/claim.ts';
import { JOB_COLUMNS } from './driver/rows.ts';
import type { Job } from './job.ts';
import type { Completion } from './settle.ts';

export interface ClaimOptions {
  /** Who claims: the invocation or process id, stored in locked_by. */
  workerId: string;
  /** The runner's pool: it claims rows of this pool and rows with no pool. */
  pool?: string | null;
  limit: number;
  now?: Date;
  /**
   * The job types this claimer can run: it claims only jobs of these types, and jobs of other
   * types stay queued for a runner that has them (never failed). Absent: every type. An empty
   * list claims nothing.
   */
  types?: readonly string[];
}

const UNIQUE_VIOLATION = '23505';
/** Tries of one claim before its contention error goes to the caller (the claim loop retries on, with its own backoff). */
const CLAIM_TRIES = 5;

/**
 * Claim up to `limit` due jobs (and jobs whose lease expired) in priority, run_at order,
 * leasing each to `workerId` with a fresh lease token. One round trip (worker.claim_jobs).
 */
export async function claimJobs(sql: Queryable, options: ClaimOptions): Promise<Job[]> {
  return retryingClaim(() => claimRows(sql, options));
}

/**
 * Write finished steps' completions and claim the next jobs in one statement (one round trip,
 * one commit: worker.settle_and_claim). The claim runs after the completions, so it sees their
 * jobs done. If the claim fails, the completions roll back with it and both are retried.
 */
export async function settleAndClaim(sql: Queryable, completions: Completion[], options: ClaimOptions): Promise<{ settled: Set<string>; jobs: Job[] }> {
  return retryingClaim(() => settleAndClaimRows(sql, completions, options));
}

/**
 * worker.settle_and_claim writes each claimed job as a positional array, in this column order
 * (migrations/functions/worker.settle_and_claim.sql): half the bytes of an object repeating every column name.
 */
export const CLAIMED_COLUMNS = JOB_COLUMNS;
/** The columns of worker.jobs after the claimed ones: the history ids the row holds, which a claim does not return. */
export { CLAIM_ONLY_COLUMNS, ROW_HELD_EVENT_COLUMNS } from './driver/rows.ts';

async function retryingClaim<T>(claim: () => Promise<T>): Promise<T> {
  // Two claimers can race to start the waiting job of one dedupe key (each saw no active job
  // in its snapshot); the unique index lets one win and the other's claim rolls back whole.
  // Likewise a claim that meets another in the per-key locks of a later round can deadlock, or
  // a lock timeout can end it; Postgres aborts it whole. Either way nothing of the failed claim
  // was written and claiming again (after a short backoff, so the two do not meet again) is safe.
  return retryContended(claim, {
    tries: CLAIM_TRIES,
    backoff: { firstMs: 5, maxMs: 100 },
    alsoRetry: (error) => (error as { code?: string } | null)?.code === UNIQUE_VIOLATION,
  });
}
