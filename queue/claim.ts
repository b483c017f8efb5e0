import type { Queryable } from './db.ts';
import { toJob, type Job } from './job.ts';

export interface ClaimOptions {
  /** Who claims: the invocation or process id, stored in locked_by. */
  workerId: string;
  /** The runner's pool: it claims rows of this pool and rows with no pool. */
  pool?: string | null;
  limit: number;
  now?: Date;
}

const UNIQUE_VIOLATION = '23505';
const DEADLOCK = '40P01';

/**
 * Claim up to `limit` due jobs (and jobs whose lease expired) in priority, run_at order,
 * leasing each to `workerId` with a fresh lease token. One round trip (worker.claim_jobs).
 */
export async function claimJobs(sql: Queryable, options: ClaimOptions): Promise<Job[]> {
  for (let attempt = 1; ; attempt++) {
    try {
      const rows = await sql`
        select * from worker.claim_jobs(${options.workerId}, ${options.pool ?? null}, ${options.limit}::int,
                                        ${options.now ?? null}::timestamptz)`;
      return rows.map(toJob);
    } catch (error) {
      // Two claimers can race to start the waiting job of one dedupe key (each saw no active job
      // in its snapshot); the unique index lets one win and the other's claim rolls back whole.
      // Claiming again is safe: nothing of the failed claim was written.
      // Likewise a claim that meets another in the per-key locks of a later round can deadlock;
      // Postgres aborts one of them, which simply claims again.
      const code = (error as { code?: string }).code;
      if ((code === UNIQUE_VIOLATION || code === DEADLOCK) && attempt < 5) continue;
      throw error;
    }
  }
}
