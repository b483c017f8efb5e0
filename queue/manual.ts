import type { Queryable, Sql } from './db.ts';
import { insertJobEvent as event } from './driver/events.ts';
import { jobById } from './driver/jobs.ts';
import { cancelRow, failRow, lockJob, requestCancelRow, requeueRow, setPriorityRow, setRunAt, takeLeaseRow } from './driver/manual.ts';
import { ConflictError, NotFoundError, ValidationError } from './errors.ts';
import { isJobId, type Job, type JobStatus } from './job.ts';

/**
 * Manual operations (over HTTP, in the CLI, or called directly). Each locks the job row, checks
 * the transition is allowed (409 otherwise), changes it and writes an event, in one transaction.
 */

interface Transition {
  /** Statuses the operation applies to; others are a conflict. */
  from: readonly JobStatus[];
  verb: string;
  now?: Date;
  change: (tx: Queryable, job: Job, now: Date) => Promise<unknown>;
}

async function transition(sql: Sql, id: string, t: Transition): Promise<Job> {
  if (!isJobId(id)) throw new NotFoundError(`no job ${id}`);
  try {
    return (await sql.begin(async (tx) => {
      const locked = await lockJob(tx, id, t.now);
      if (!locked) throw new NotFoundError(`no job ${id}`);
      const { job, now } = locked;
      if (!t.from.includes(job.status)) {
        throw new ConflictError(`cannot ${t.verb} job ${id}: it is ${job.status} (allowed from ${t.from.join(', ')})`);
      }
      await t.change(tx, job, now);
      const updated = await jobById(tx, id);
      if (!updated) throw new NotFoundError(`no job ${id}`);
      return updated;
    }));
  } catch (error) {
    if ((error as { code?: string }).code === '23505') {
      throw new ConflictError(`cannot change job ${id}: another job with its dedupe key is already waiting or active`);
    }
    throw error;
  }
}

/** Run a failed, cancelled or oom_killed job again from its checkpoint, with fresh attempts. */
export async function requeueJob(sql: Sql, id: string, options: { now?: Date } = {}): Promise<Job> {
  return transition(sql, id, {
    from: ['failed', 'cancelled', 'oom_killed'],
    verb: 'requeue',
    now: options.now,
    change: async (tx, job, now) => {
      await requeueRow(tx, job.id, now);
      await event(tx, job.id, now, 'requeued', { from: job.status });
    },
  });
}

/** End a queued or running job as failed with a reason (a running owner's settle then matches nothing). */
export async function failJobPermanently(sql: Sql, id: string, reason: string, options: { now?: Date } = {}): Promise<Job> {
  if (!reason.trim()) throw new ValidationError('a reason is required to fail a job', 'reason');
  return transition(sql, id, {
    from: ['queued', 'running'],
    verb: 'fail',
    now: options.now,
    change: async (tx, job, now) => {
      await failRow(tx, job.id, reason, now);
      await event(tx, job.id, now, 'failed', { reason, manual: true });
    },
  });
}

/**
 * Cancel. A job that never started is cancelled at once. A job that has started (running, or
 * queued between steps with work outstanding at a provider) gets a cancel request: the runner
 * runs its type's cancel hook at the next step boundary, then the job ends cancelled.
 */
export async function cancelJob(sql: Sql, id: string, reason = 'cancelled by operator', options: { now?: Date } = {}): Promise<Job> {
  return transition(sql, id, {
    from: ['queued', 'running'],
    verb: 'cancel',
    now: options.now,
    change: async (tx, job, now) => {
      if (job.status === 'queued' && job.startedAt === null) {
        await cancelRow(tx, job.id, reason, now);
        await event(tx, job.id, now, 'cancelled', { reason, hookRan: false });
        return;
      }
      if (job.cancelRequestedAt) return; // already requested: idempotent
      await requestCancelRow(tx, job.id, reason, now);
      await event(tx, job.id, now, 'cancel_requested', { reason });
    },
  });
}

/** Move a queued job's run_at (e.g. run now, or later). */
export async function rescheduleJob(sql: Sql, id: string, runAt: Date, options: { now?: Date } = {}): Promise<Job> {
  if (Number.isNaN(runAt.getTime())) throw new ValidationError('runAt must be a valid time', 'runAt');
  return transition(sql, id, {
    from: ['queued'],
    verb: 'reschedule',
    now: options.now,
    change: async (tx, job, now) => {
      await setRunAt(tx, job.id, runAt);
      await event(tx, job.id, now, 'rescheduled', { from: job.runAt.toISOString(), to: runAt.toISOString() });
    },
  });
}

/**
 * Resume a job parked at a step (queued with run_at = infinity) so it runs now. With
 * `expectStep`, a job at another step is a conflict (e.g. a cluster not awaiting bootstrap).
 */
export async function resumeJob(sql: Sql, id: string, expectStep?: string, options: { now?: Date } = {}): Promise<Job> {
  return transition(sql, id, {
    from: ['queued'],
    verb: 'resume',
    now: options.now,
    change: async (tx, job, now) => {
      if (expectStep && job.step !== expectStep) {
        throw new ConflictError(`cannot resume job ${id}: it is at step ${job.step}, not ${expectStep}`);
      }
      await setRunAt(tx, job.id, now);
      await event(tx, job.id, now, 'resumed', { step: job.step });
    },
  });
}

export async function setJobPriority(sql: Sql, id: string, priority: number, options: { now?: Date } = {}): Promise<Job> {
  if (!Number.isInteger(priority) || priority < 0 || priority > 1000) {
    throw new ValidationError('priority must be an integer from 0 to 1000', 'priority');
  }
  return transition(sql, id, {
    from: ['queued', 'running'],
    verb: 'change the priority of',
    now: options.now,
    change: async (tx, job, now) => {
      await setPriorityRow(tx, job.id, priority);
      await event(tx, job.id, now, 'priority_changed', { from: job.priority, to: priority });
    },
  });
}

/** Take the lease from a running job's owner and make it claimable at once (the owner's settle then matches nothing). */
export async function releaseJobLease(sql: Sql, id: string, options: { now?: Date } = {}): Promise<Job> {
  return transition(sql, id, {
    from: ['running'],
    verb: 'release the lease of',
    now: options.now,
    change: async (tx, job, now) => {
      await takeLeaseRow(tx, job.id, now);
      await event(tx, job.id, now, 'lease_released', { owner: job.lockedBy, manual: true });
    },
  });
}
