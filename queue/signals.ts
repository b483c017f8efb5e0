import type { Queryable, Sql } from './db.ts';
import { endTimedOutWaitRow, jobWaitRow, settleWaitRow, signalRow, type JobWait, type SignalAnswer, type WaitSettle } from './driver/signals.ts';
import { NotFoundError, translatePgError } from './errors.ts';
import { isJobId, type Job, type Json } from './job.ts';
import type { SettleOptions } from './settle.ts';
import type { WaitEvent, WaitResult } from './signals/wait.ts';

export type { JobWait, SignalAnswer, WaitSettle } from './driver/signals.ts';
export { waitFor, type WaitEvent, type WaitOptions, type WaitResult } from './signals/wait.ts';

/**
 * Signals: a step ends with `waitFor(name, { key, timeoutMs })`, the job parks (queued, due only
 * at its timeout: no claims while it waits), and an event ends the wait: `signalJob` for one
 * job, `sendEvent` for every job waiting on (name, key). An event no wait takes is kept and
 * taken by the next wait on it. Each is one SQL function (worker.signal, worker.wait_for,
 * worker.end_timed_out_wait), so SQL, TypeScript, HTTP, the CLI and the dashboard run the same
 * transition; refusals are the engine's SQLSTATEs (SB400 ValidationError with the field, SB404,
 * SB409).
 */

export interface SignalInput {
  /** The correlation key (for a job: only its wait on this key takes the event). */
  key?: string;
  payload?: Json;
  now?: Date;
}

async function translated<T>(op: () => Promise<T>): Promise<T> {
  try {
    return await op();
  } catch (error) {
    throw translatePgError(error);
  }
}

/** Send the event `name` to one job: its open wait on it takes it, or it is kept for the job's next wait. SB404/SB409 for an unknown or ended job. */
export async function signalJob(sql: Queryable, jobId: string, name: string, input: SignalInput = {}): Promise<SignalAnswer> {
  if (!isJobId(jobId)) throw new NotFoundError(`no job ${jobId}`);
  return translated(() => signalRow(sql, { name, key: input.key, payload: input.payload, jobId }, input.now));
}

/** Send the event (name, key) to every job waiting on it; kept for the next wait on it when none is. */
export async function sendEvent(sql: Queryable, name: string, input: SignalInput = {}): Promise<SignalAnswer> {
  return translated(() => signalRow(sql, { name, key: input.key, payload: input.payload }, input.now));
}

/** What a job waits for now (null when it is not waiting). */
export async function jobWait(sql: Queryable, jobId: string): Promise<JobWait | null> {
  if (!isJobId(jobId)) return null;
  return jobWaitRow(sql, jobId);
}

/** Settle a step that returned waitFor (fenced by the lease); null when the lease was lost. */
export async function settleWait(sql: Sql, job: Pick<Job, 'id' | 'leaseToken'>, wait: WaitResult, options: SettleOptions = {}): Promise<WaitSettle | null> {
  const write = (q: Queryable) => translated(() => settleWaitRow(q, job, wait, options.now));
  if (!options.effect) return write(sql);
  const effect = options.effect;
  return sql.begin(async (tx) => {
    const settled = await write(tx);
    if (settled !== null) await effect(tx);
    return settled;
  });
}

/** A step resumed at its wait's step with no event: end the wait as timed out (null when the lease was lost). */
export async function endTimedOutWait(sql: Queryable, job: Pick<Job, 'id' | 'leaseToken'>, options: { now?: Date } = {}): Promise<WaitEvent | null> {
  return endTimedOutWaitRow(sql, job, options.now);
}
