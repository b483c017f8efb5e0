import type { Queryable } from '../db.ts';
import type { Job } from '../job.ts';
import { parseJobRow } from './rows.ts';

/**
 * The manual operations are SQL functions (migrations/functions/worker.requeue_job.sql and the
 * others beside it), so an operator at a SQL prompt and queue/manual.ts run the same transition:
 * each locks the job, checks its status allows the operation (SB404 / SB409), changes the row and
 * writes its event in one statement. These are their calls; each answers the job as it now is.
 */
async function jobOf(rows: Promise<readonly unknown[]>): Promise<Job> {
  const [row] = await rows;
  return parseJobRow(row);
}

const at = (now: Date | undefined) => now ?? null;

export const manualCalls = {
  requeue: (sql: Queryable, id: string, now?: Date) => jobOf(sql`select * from worker.requeue_job(${id}::uuid, ${at(now)}::timestamptz)`),
  fail: (sql: Queryable, id: string, reason: string, now?: Date) =>
    jobOf(sql`select * from worker.fail_job(${id}::uuid, ${reason}, ${at(now)}::timestamptz)`),
  cancel: (sql: Queryable, id: string, reason: string, now?: Date) =>
    jobOf(sql`select * from worker.cancel_job(${id}::uuid, ${reason}, ${at(now)}::timestamptz)`),
  reschedule: (sql: Queryable, id: string, runAt: Date, now?: Date) =>
    jobOf(sql`select * from worker.reschedule_job(${id}::uuid, ${runAt}::timestamptz, ${at(now)}::timestamptz)`),
  resume: (sql: Queryable, id: string, expectStep: string | undefined, now?: Date) =>
    jobOf(sql`select * from worker.resume_job(${id}::uuid, ${expectStep ?? null}::text, ${at(now)}::timestamptz)`),
  priority: (sql: Queryable, id: string, priority: number, now?: Date) =>
    jobOf(sql`select * from worker.set_job_priority(${id}::uuid, ${priority}::int, ${at(now)}::timestamptz)`),
  releaseLease: (sql: Queryable, id: string, now?: Date) => jobOf(sql`select * from worker.release_job_lease(${id}::uuid, ${at(now)}::timestamptz)`),
};
