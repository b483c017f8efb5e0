import type { Queryable } from '../db.ts';
import type { Job } from '../job.ts';
import { at } from './clock.ts';
import { parseJobRow, record, time } from './rows.ts';

/**
 * The statements of the manual operations (queue/manual.ts). Each runs inside the operation's
 * transaction, after lockJob took the row: the operation has already checked the transition.
 */

/** The job's row, locked until the transaction ends, and the statement clock's time. */
export async function lockJob(sql: Queryable, id: string, now: Date | undefined): Promise<{ job: Job; now: Date } | null> {
  const [row] = await sql`select *, ${at(sql, now)} as _now from worker.jobs where id = ${id} for update`;
  if (!row) return null;
  return { job: parseJobRow(row), now: time(record(row, 'locked job row')._now, '_now') };
}

export async function requeueRow(sql: Queryable, id: string, now: Date): Promise<void> {
  await sql`update worker.jobs set status = 'queued', attempts = 0, run_at = ${now}, finished_at = null,
              locked_until = null, cancel_requested_at = null, cancel_reason = null, last_error = null
            where id = ${id}`;
}

export async function failRow(sql: Queryable, id: string, reason: string, now: Date): Promise<void> {
  await sql`update worker.jobs set status = 'failed', last_error = ${reason}, finished_at = ${now}, locked_until = null,
              running_pool = null where id = ${id}`;
}

/** A job that never started ends cancelled at once. */
export async function cancelRow(sql: Queryable, id: string, reason: string, now: Date): Promise<void> {
  await sql`update worker.jobs set status = 'cancelled', finished_at = ${now}, last_error = ${reason},
              cancel_requested_at = ${now}, cancel_reason = ${reason} where id = ${id}`;
}

/** A started job gets a request; a queued one becomes due so its cancel hook runs next. */
export async function requestCancelRow(sql: Queryable, id: string, reason: string, now: Date): Promise<void> {
  await sql`update worker.jobs set cancel_requested_at = ${now}, cancel_reason = ${reason},
              run_at = case when status = 'queued' then ${now} else run_at end
            where id = ${id}`;
}

export async function setRunAt(sql: Queryable, id: string, runAt: Date): Promise<void> {
  await sql`update worker.jobs set run_at = ${runAt} where id = ${id}`;
}

export async function setPriorityRow(sql: Queryable, id: string, priority: number): Promise<void> {
  await sql`update worker.jobs set priority = ${priority} where id = ${id}`;
}

/** The owner's lease taken away: claimable at once, and the owner's fenced settle matches nothing. */
export async function takeLeaseRow(sql: Queryable, id: string, now: Date): Promise<void> {
  await sql`update worker.jobs set status = 'queued', run_at = ${now}, locked_until = null, running_pool = null,
              lease_token = null where id = ${id}`;
}
