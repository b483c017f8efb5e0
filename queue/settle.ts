import type { Queryable, Sql, TransactionSql } from './db.ts';
import type { Job, Json, JsonObject } from './job.ts';

/**
 * Settling a step: every statement here is fenced by the job's lease token and `running`
 * status, so an owner that lost its lease (0 rows) can never overwrite someone else's work.
 */

/** Work done in the same transaction as a settle, only if the fence held (e.g. write desired state). */
export type SettleEffect = (tx: TransactionSql) => Promise<unknown>;

export interface SettleOptions {
  now?: Date;
  effect?: SettleEffect;
}

type Fenced = Pick<Job, 'id' | 'leaseToken'>;

async function fenced(sql: Sql, effect: SettleEffect | undefined, statement: (q: Queryable) => PromiseLike<readonly unknown[]>): Promise<boolean> {
  if (!effect) return (await statement(sql)).length > 0;
  return sql.begin(async (tx) => {
    const rows = await statement(tx);
    if (rows.length === 0) return false;
    await effect(tx);
    return true;
  }) as Promise<boolean>;
}

export interface HeartbeatResult {
  /** False when the lease was lost: the step must stop and not settle. */
  owned: boolean;
  cancelRequested: boolean;
  lockedUntil: Date | null;
}

/** Extend the lease of a job still owned, by its type's lease length. */
export async function heartbeat(sql: Queryable, job: Fenced, options: { now?: Date } = {}): Promise<HeartbeatResult> {
  const [row] = await sql`
    update worker.jobs j
       set locked_until = coalesce(${options.now ?? null}::timestamptz, now()) + make_interval(secs => t.lease_ms / 1000.0)
      from worker.job_types t
     where j.id = ${job.id} and j.lease_token = ${job.leaseToken} and j.status = 'running' and t.type = j.type
    returning j.locked_until, j.cancel_requested_at`;
  if (!row) return { owned: false, cancelRequested: false, lockedUntil: null };
  return { owned: true, cancelRequested: row.cancel_requested_at !== null, lockedUntil: row.locked_until as Date };
}

/** done: the result is stored once (the fence makes a second completion match nothing). */
export async function completeJob(sql: Sql, job: Fenced, result: Json | undefined, options: SettleOptions = {}): Promise<boolean> {
  return fenced(sql, options.effect, (q) => q`
    with upd as (
      update worker.jobs
         set status = 'done', result = ${sql.json((result ?? null) as Json)}::jsonb,
             finished_at = coalesce(${options.now ?? null}::timestamptz, now()), locked_until = null, running_pool = null
       where id = ${job.id} and lease_token = ${job.leaseToken} and status = 'running'
      returning id, finished_at, attempts)
    insert into worker.job_events (job_id, at, kind, detail)
    select id, finished_at, 'done', jsonb_build_object('attempt', attempts) from upd
    returning job_id`);
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
  const rows = await sql`select id from worker.complete_jobs(${sql.json(completionsJson(completions))}::jsonb, ${options.now ?? null}::timestamptz)`;
  return new Set(rows.map((r) => r.id as string));
}

/** The p_done argument of worker.complete_jobs and worker.settle_and_claim. */
export function completionsJson(completions: Completion[]): Json {
  return completions.map((c) => ({ id: c.job.id, token: c.job.leaseToken, result: c.result ?? null }));
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
  const delayMs = next.delayMs === undefined ? 0 : next.delayMs;
  return fenced(sql, options.effect, (q) => q`
    with upd as (
      update worker.jobs
         set status = 'queued', step = ${next.step}, checkpoint = checkpoint || ${sql.json(next.checkpoint ?? {})}::jsonb,
             attempts = 0, locked_until = null, running_pool = null,
             run_at = case
               when cancel_requested_at is not null then coalesce(${options.now ?? null}::timestamptz, now())
               when ${delayMs}::bigint is null then 'infinity'::timestamptz
               else coalesce(${options.now ?? null}::timestamptz, now()) + make_interval(secs => ${delayMs ?? 0}::bigint / 1000.0) end
       where id = ${job.id} and lease_token = ${job.leaseToken} and status = 'running'
      returning id, step, run_at)
    insert into worker.job_events (job_id, at, kind, detail)
    select id, coalesce(${options.now ?? null}::timestamptz, now()), 'checkpoint',
           jsonb_build_object('step', step, 'runAt', run_at) from upd
    returning job_id`);
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
  const now = options.now ?? null;
  const cancelDueNow = options.cancelDueNow ?? true;
  const [row] = await sql`
    with upd as (
      update worker.jobs j
         set status = case when j.attempts >= j.max_attempts then 'failed' else 'queued' end,
             last_error = ${error}, locked_until = null, running_pool = null,
             run_at = case when ${cancelDueNow}::boolean and j.cancel_requested_at is not null then coalesce(${now}::timestamptz, now())
                           else coalesce(${now}::timestamptz, now()) + make_interval(secs => ${delayMs}::bigint / 1000.0) end,
             finished_at = case when j.attempts >= j.max_attempts then coalesce(${now}::timestamptz, now()) end
       where j.id = ${job.id} and j.lease_token = ${job.leaseToken} and j.status = 'running'
      returning j.id, j.type, j.status, j.attempts, j.max_attempts, j.run_at),
    ev as (
      insert into worker.job_events (job_id, at, kind, detail)
      select id, coalesce(${now}::timestamptz, now()), case status when 'failed' then 'failed' else 'retry' end,
             jsonb_build_object('error', ${error}::text, 'attempt', attempts, 'maxAttempts', max_attempts)
             || case when status = 'queued' then jsonb_build_object('runAt', run_at) else '{}'::jsonb end
        from upd),
    al as (
      insert into worker.alerts (kind, key, job_id, message, detail, opened_at, last_seen_at)
      select 'poison_job', id::text, id, 'job ' || id || ' (' || type || ') failed after ' || attempts || ' attempts: ' || ${error}::text,
             jsonb_build_object('type', type, 'attempts', attempts), coalesce(${now}::timestamptz, now()), coalesce(${now}::timestamptz, now())
        from upd where status = 'failed'
      on conflict do nothing)
    select status from upd`;
  return row ? (row.status as RetryOutcome) : 'lost';
}

/** failed at once (a permanent error: retrying cannot help), with a poison_job alert. */
export async function failJob(sql: Queryable, job: Fenced, error: string, options: { now?: Date } = {}): Promise<boolean> {
  const now = options.now ?? null;
  const rows = await sql`
    with upd as (
      update worker.jobs
         set status = 'failed', last_error = ${error}, locked_until = null, running_pool = null,
             finished_at = coalesce(${now}::timestamptz, now())
       where id = ${job.id} and lease_token = ${job.leaseToken} and status = 'running'
      returning id, type, attempts),
    ev as (
      insert into worker.job_events (job_id, at, kind, detail)
      select id, coalesce(${now}::timestamptz, now()), 'failed', jsonb_build_object('error', ${error}::text, 'permanent', true) from upd),
    al as (
      insert into worker.alerts (kind, key, job_id, message, detail, opened_at, last_seen_at)
      select 'poison_job', id::text, id, 'job ' || id || ' (' || type || ') failed: ' || ${error}::text,
             jsonb_build_object('type', type, 'attempts', attempts), coalesce(${now}::timestamptz, now()), coalesce(${now}::timestamptz, now())
        from upd
      on conflict do nothing)
    select id from upd`;
  return rows.length > 0;
}

/** cancelled: the running job's cancel hook has run; the job ends here. */
export async function settleCancelled(sql: Sql, job: Fenced, options: SettleOptions = {}): Promise<boolean> {
  return fenced(sql, options.effect, (q) => q`
    with upd as (
      update worker.jobs
         set status = 'cancelled', finished_at = coalesce(${options.now ?? null}::timestamptz, now()),
             locked_until = null, running_pool = null, last_error = coalesce(cancel_reason, 'cancelled')
       where id = ${job.id} and lease_token = ${job.leaseToken} and status = 'running'
      returning id, finished_at, cancel_reason)
    insert into worker.job_events (job_id, at, kind, detail)
    select id, finished_at, 'cancelled', jsonb_build_object('reason', cancel_reason, 'hookRan', true) from upd
    returning job_id`);
}

/** Give the lease back without using up the attempt, so the job is claimable at once (graceful shutdown). */
export async function releaseOwnLease(sql: Queryable, job: Fenced, reason: string, options: { now?: Date } = {}): Promise<boolean> {
  const now = options.now ?? null;
  const rows = await sql`
    with upd as (
      update worker.jobs
         set status = 'queued', attempts = greatest(attempts - 1, 0), locked_until = null, running_pool = null,
             run_at = coalesce(${now}::timestamptz, now())
       where id = ${job.id} and lease_token = ${job.leaseToken} and status = 'running'
      returning id)
    insert into worker.job_events (job_id, at, kind, detail)
    select id, coalesce(${now}::timestamptz, now()), 'lease_released', jsonb_build_object('reason', ${reason}::text) from upd
    returning job_id`;
  return rows.length > 0;
}
