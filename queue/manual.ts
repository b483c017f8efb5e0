import type { Sql } from './db.ts';
import { manualCalls as call } from './driver/manual.ts';
import { NotFoundError, translatePgError, ValidationError } from './errors.ts';
import { isJobId, type Job } from './job.ts';

/**
 * Manual operations (over HTTP, in the CLI, on the dashboard, or called directly). Each is one SQL
 * function (worker.requeue_job, fail_job, cancel_job, reschedule_job, resume_job,
 * set_job_priority, release_job_lease) that locks the job row, checks the transition is allowed,
 * changes it and writes an event: the same statement an operator can run at a SQL prompt. Its
 * refusals arrive as the engine's SQLSTATEs: SB404 NotFoundError, SB409 ConflictError (409),
 * SB400 ValidationError.
 */
async function operate(id: string, op: () => Promise<Job>): Promise<Job> {
  // a malformed id names no job (the SQL functions take a uuid and would refuse it as a cast)
  if (!isJobId(id)) throw new NotFoundError(`no job ${id}`);
  try {
    return await op();
  } catch (error) {
    throw translatePgError(error);
  }
}

/** Run a failed, cancelled or oom_killed job again from its checkpoint, with fresh attempts. */
export async function requeueJob(sql: Sql, id: string, options: { now?: Date } = {}): Promise<Job> {
  return operate(id, () => call.requeue(sql, id, options.now));
}

/** End a queued or running job as failed with a reason (a running owner's settle then matches nothing). */
export async function failJobPermanently(sql: Sql, id: string, reason: string, options: { now?: Date } = {}): Promise<Job> {
  return operate(id, () => call.fail(sql, id, reason, options.now));
}

/**
 * Cancel. A job that never started is cancelled at once. A job that has started (running, or
 * queued between steps with work outstanding at a provider) gets a cancel request: the runner
 * runs its type's cancel hook at the next step boundary, then the job ends cancelled.
 */
export async function cancelJob(sql: Sql, id: string, reason = 'cancelled by operator', options: { now?: Date } = {}): Promise<Job> {
  return operate(id, () => call.cancel(sql, id, reason, options.now));
}

/** Move a queued job's run_at (e.g. run now, or later). */
export async function rescheduleJob(sql: Sql, id: string, runAt: Date, options: { now?: Date } = {}): Promise<Job> {
  if (Number.isNaN(runAt.getTime())) throw new ValidationError('runAt must be a valid time', 'runAt');
  return operate(id, () => call.reschedule(sql, id, runAt, options.now));
}

/**
 * Resume a job parked at a step (queued with run_at = infinity) so it runs now. With
 * `expectStep`, a job at another step is a conflict (e.g. a cluster not awaiting bootstrap).
 */
export async function resumeJob(sql: Sql, id: string, expectStep?: string, options: { now?: Date } = {}): Promise<Job> {
  return operate(id, () => call.resume(sql, id, expectStep, options.now));
}

export async function setJobPriority(sql: Sql, id: string, priority: number, options: { now?: Date } = {}): Promise<Job> {
  // the SQL function checks the range; a fraction would be rounded by the int cast, so it is refused here
  if (!Number.isInteger(priority)) throw new ValidationError('priority must be an integer from 0 to 1000', 'priority');
  return operate(id, () => call.priority(sql, id, priority, options.now));
}

/** Take the lease from a running job's owner and make it claimable at once (the owner's settle then matches nothing). */
export async function releaseJobLease(sql: Sql, id: string, options: { now?: Date } = {}): Promise<Job> {
  return operate(id, () => call.releaseLease(sql, id, options.now));
}
