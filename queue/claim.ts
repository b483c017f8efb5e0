import type { Queryable } from './db.ts';
import { toJob, type Job } from './job.ts';
import { completionsJson, type Completion } from './settle.ts';

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
const DEADLOCK = '40P01';

/**
 * Claim up to `limit` due jobs (and jobs whose lease expired) in priority, run_at order,
 * leasing each to `workerId` with a fresh lease token. One round trip (worker.claim_jobs).
 */
export async function claimJobs(sql: Queryable, options: ClaimOptions): Promise<Job[]> {
  return retryingClaim(async () => (await claimStatement(sql, options)).map(toJob));
}

function claimStatement(sql: Queryable, options: ClaimOptions) {
  return sql`
    select * from worker.claim_jobs(${options.workerId}, ${options.pool ?? null}, ${options.limit}::int,
                                    ${options.now ?? null}::timestamptz, ${typesParam(options)}::text[])`;
}

/**
 * The p_types argument (null takes every type) as a text[] literal: a client that did not fetch
 * the server's types (fetch_types: false, as the Worker's) cannot serialize a JS array.
 */
function typesParam(options: ClaimOptions): string | null {
  if (options.types === undefined) return null;
  return `{${options.types.map((t) => `"${t.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`).join(',')}}`;
}

/**
 * Write finished steps' completions and claim the next jobs in one statement (one round trip,
 * one commit: worker.settle_and_claim). The claim runs after the completions, so it sees their
 * jobs done. If the claim fails, the completions roll back with it and both are retried.
 */
export async function settleAndClaim(sql: Queryable, completions: Completion[], options: ClaimOptions): Promise<{ settled: Set<string>; jobs: Job[] }> {
  return retryingClaim(async () => {
    const [row] = await sql`
      select worker.settle_and_claim(${sql.json(completionsJson(completions))}::jsonb, ${options.workerId}, ${options.pool ?? null},
                                     ${options.limit}::int, ${options.now ?? null}::timestamptz, ${typesParam(options)}::text[]) as r`;
    const r = row!.r as { settled: string[]; jobs: unknown[][] };
    return { settled: new Set(r.settled), jobs: r.jobs.map(claimedJob) };
  });
}

/**
 * worker.settle_and_claim writes each claimed job as a positional array, in this column order
 * (migrations/0062): half the bytes of an object repeating every column name.
 */
export const CLAIMED_COLUMNS = [
  'id', 'type', 'payload', 'status', 'priority', 'run_at', 'attempts', 'max_attempts', 'locked_until',
  'locked_by', 'lease_token', 'dedupe_key', 'submit_key', 'last_error', 'result', 'step', 'checkpoint',
  'pool', 'weight', 'running_pool', 'concurrency_key', 'concurrency_limit', 'cancel_requested_at',
  'cancel_reason', 'superseded_by', 'crashes', 'created_at', 'started_at', 'claimed_at', 'finished_at',
] as const;

function claimedJob(values: unknown[]): Job {
  if (values.length !== CLAIMED_COLUMNS.length) {
    throw new Error(`settle_and_claim returned ${values.length} columns per job, expected ${CLAIMED_COLUMNS.length}: migrations and queue/claim.ts disagree`);
  }
  const row: Record<string, unknown> = {};
  for (let i = 0; i < CLAIMED_COLUMNS.length; i++) row[CLAIMED_COLUMNS[i]!] = values[i];
  return toJob(row);
}

async function retryingClaim<T>(claim: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await claim();
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
