import type { Queryable } from '../db.ts';
import type { Job, Json } from '../job.ts';
import type { Completion, ContinueInput, RetryOutcome } from '../settle.ts';
import { at } from './clock.ts';
import { record, text, timeOrNull } from './rows.ts';

/**
 * The statements that settle a step. Each is fenced by the job's lease token and `running`
 * status: an owner that lost its lease matches 0 rows and writes nothing.
 */

type Fenced = Pick<Job, 'id' | 'leaseToken'>;
type Now = Date | undefined;

/** Extend the lease by the type's lease length; null when the lease is no longer held. */
export async function extendLease(sql: Queryable, job: Fenced, now: Now): Promise<{ lockedUntil: Date | null; cancelRequested: boolean } | null> {
  const [row] = await sql`
    update worker.jobs j
       set locked_until = ${at(sql, now)} + make_interval(secs => t.lease_ms / 1000.0)
      from worker.job_types t
     where j.id = ${job.id} and j.lease_token = ${job.leaseToken} and j.status = 'running' and t.type = j.type
    returning j.locked_until, j.cancel_requested_at`;
  if (!row) return null;
  const r = record(row, 'heartbeat row');
  return { lockedUntil: timeOrNull(r.locked_until, 'locked_until'), cancelRequested: timeOrNull(r.cancel_requested_at, 'cancel_requested_at') !== null };
}

/** The p_done argument of worker.complete_jobs and worker.settle_and_claim. */
export function completionsJson(completions: Completion[]): Json {
  return completions.map((c) => ({ id: c.job.id, token: c.job.leaseToken, result: c.result ?? null }));
}

/**
 * done, through worker.complete_jobs: the one implementation of the transition, which the batch
 * completer and worker.settle_and_claim use too. Returns the ids whose fence held.
 */
export async function markDone(sql: Queryable, completions: Completion[], now: Now): Promise<Set<string>> {
  const rows = await sql`select id from worker.complete_jobs(${sql.json(completionsJson(completions))}::jsonb, ${now ?? null}::timestamptz)`;
  return new Set(rows.map((r) => text(record(r, 'complete_jobs row').id, 'id')));
}

/** continue: checkpoint merged, back to queued after the delay (null parks it), lease released. */
export async function markContinued(sql: Queryable, job: Fenced, next: ContinueInput, now: Now): Promise<boolean> {
  const delayMs = next.delayMs === undefined ? 0 : next.delayMs;
  const rows = await sql`
    with upd as (
      update worker.jobs
         set status = 'queued', step = ${next.step},
             -- a wait's keys ($wait, $event: queue/signals/wait.ts) end with the step it resumed
             checkpoint = (checkpoint - '$wait' - '$event') || ${sql.json(next.checkpoint ?? {})}::jsonb,
             attempts = 0, locked_until = null, running_pool = null,
             run_at = case
               when cancel_requested_at is not null then ${at(sql, now)}
               when ${delayMs}::bigint is null then 'infinity'::timestamptz
               else ${at(sql, now)} + make_interval(secs => ${delayMs ?? 0}::bigint / 1000.0) end
       where id = ${job.id} and lease_token = ${job.leaseToken} and status = 'running'
      returning id, step, run_at)
    insert into worker.job_events (job_id, at, kind, detail)
    select id, ${at(sql, now)}, 'checkpoint', jsonb_build_object('step', step, 'runAt', run_at) from upd
    returning job_id`;
  return rows.length > 0;
}

/**
 * retry: back to queued after the delay while attempts < max_attempts; otherwise failed, with
 * last_error and a poison_job alert in the same statement.
 */
export async function markRetried(sql: Queryable, job: Fenced, error: string, delayMs: number, cancelDueNow: boolean, now: Now): Promise<RetryOutcome> {
  const [row] = await sql`
    with upd as (
      update worker.jobs j
         set status = case when j.attempts >= j.max_attempts then 'failed' else 'queued' end,
             last_error = ${error}, locked_until = null, running_pool = null,
             run_at = case when ${cancelDueNow}::boolean and j.cancel_requested_at is not null then ${at(sql, now)}
                           else ${at(sql, now)} + make_interval(secs => ${delayMs}::bigint / 1000.0) end,
             finished_at = case when j.attempts >= j.max_attempts then ${at(sql, now)} end
       where j.id = ${job.id} and j.lease_token = ${job.leaseToken} and j.status = 'running'
      returning j.id, j.type, j.status, j.attempts, j.max_attempts, j.run_at),
    ev as (
      insert into worker.job_events (job_id, at, kind, detail)
      select id, ${at(sql, now)}, case status when 'failed' then 'failed' else 'retry' end,
             jsonb_build_object('error', ${error}::text, 'attempt', attempts, 'maxAttempts', max_attempts)
             || case when status = 'queued' then jsonb_build_object('runAt', run_at) else '{}'::jsonb end
        from upd)
    select status,
           case when status = 'failed' then worker.raise_poison_alert('poison_job', id,
             'job ' || id || ' (' || type || ') failed after ' || attempts || ' attempts: ' || ${error}::text,
             jsonb_build_object('type', type, 'attempts', attempts), ${at(sql, now)}) end as alerted
      from upd`;
  if (!row) return 'lost';
  return text(record(row, 'retry row').status, 'status') === 'failed' ? 'failed' : 'queued';
}

/** failed at once (a permanent error), with a poison_job alert in the same statement. */
export async function markFailed(sql: Queryable, job: Fenced, error: string, now: Now): Promise<boolean> {
  const rows = await sql`
    with upd as (
      update worker.jobs
         set status = 'failed', last_error = ${error}, locked_until = null, running_pool = null,
             finished_at = ${at(sql, now)}
       where id = ${job.id} and lease_token = ${job.leaseToken} and status = 'running'
      returning id, type, attempts),
    ev as (
      insert into worker.job_events (job_id, at, kind, detail)
      select id, ${at(sql, now)}, 'failed', jsonb_build_object('error', ${error}::text, 'permanent', true) from upd)
    select id, worker.raise_poison_alert('poison_job', id, 'job ' || id || ' (' || type || ') failed: ' || ${error}::text,
                                         jsonb_build_object('type', type, 'attempts', attempts), ${at(sql, now)}) as alerted
      from upd`;
  return rows.length > 0;
}

/** cancelled: the cancel hook has run; the job ends here. */
export async function markCancelled(sql: Queryable, job: Fenced, now: Now): Promise<boolean> {
  const rows = await sql`
    with upd as (
      update worker.jobs
         set status = 'cancelled', finished_at = ${at(sql, now)},
             locked_until = null, running_pool = null, last_error = coalesce(cancel_reason, 'cancelled')
       where id = ${job.id} and lease_token = ${job.leaseToken} and status = 'running'
      returning id, finished_at, cancel_reason)
    insert into worker.job_events (job_id, at, kind, detail)
    select id, finished_at, 'cancelled', jsonb_build_object('reason', cancel_reason, 'hookRan', true) from upd
    returning job_id`;
  return rows.length > 0;
}

/** The owner gives its lease back without using up the attempt: claimable at once. */
export async function releaseOwnLease(sql: Queryable, job: Fenced, reason: string, now: Now): Promise<boolean> {
  const rows = await sql`
    with upd as (
      update worker.jobs
         set status = 'queued', attempts = greatest(attempts - 1, 0), locked_until = null, running_pool = null,
             run_at = ${at(sql, now)}
       where id = ${job.id} and lease_token = ${job.leaseToken} and status = 'running'
      returning id)
    insert into worker.job_events (job_id, at, kind, detail)
    select id, ${at(sql, now)}, 'lease_released', jsonb_build_object('reason', ${reason}::text) from upd
    returning job_id`;
  return rows.length > 0;
}

