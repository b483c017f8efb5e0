import type { Queryable } from '../db.ts';
import type { Job, Json } from '../job.ts';
import type { WaitEvent, WaitResult } from '../signals/wait.ts';
import { record, text, textOrNull, time, timeOrNull } from './rows.ts';

/**
 * The calls of the signal SQL functions (migrations/functions/worker.signal.sql, wait_for,
 * end_timed_out_wait): each is the one implementation of its transition, the same statement an
 * operator can run at a SQL prompt.
 */

type Fenced = Pick<Job, 'id' | 'leaseToken'>;

export type WaitSettle = 'waiting' | 'signalled' | 'cancelling';

/** Settle a step that returned waitFor; null when the lease was lost. */
export async function settleWaitRow(sql: Queryable, job: Fenced, wait: WaitResult, now: Date | undefined): Promise<WaitSettle | null> {
  const [row] = await sql`
    select worker.wait_for(${job.id}::uuid, ${job.leaseToken}::uuid, ${wait.name}, ${wait.key ?? null}::text, ${wait.step},
                           ${wait.timeoutMs ?? null}::bigint, ${sql.json(wait.checkpoint ?? {})}::jsonb, ${now ?? null}::timestamptz) as settled`;
  return textOrNull(record(row, 'wait_for row').settled, 'settled') as WaitSettle | null;
}

/** End a wait whose job was claimed without an event (timed out); null when the lease was lost. */
export async function endTimedOutWaitRow(sql: Queryable, job: Fenced, now: Date | undefined): Promise<WaitEvent | null> {
  const [row] = await sql`select worker.end_timed_out_wait(${job.id}::uuid, ${job.leaseToken}::uuid, ${now ?? null}::timestamptz) as event`;
  return (record(row, 'end_timed_out_wait row').event as WaitEvent | null) ?? null;
}

export interface SignalAnswer {
  /** The jobs whose wait took the event. */
  delivered: string[];
  /** When no wait took it: the kept event's id, taken by the next wait on it. */
  keptEventId: number | null;
}

export async function signalRow(
  sql: Queryable,
  event: { name: string; key?: string | null; payload?: Json | null; jobId?: string | null },
  now: Date | undefined,
): Promise<SignalAnswer> {
  const payload = event.payload === undefined || event.payload === null ? null : sql.json(event.payload);
  const [row] = await sql`
    select worker.signal(${event.name}, ${event.key ?? null}::text, ${payload}::jsonb, ${event.jobId ?? null}::uuid, ${now ?? null}::timestamptz) as answer`;
  const answer = record(record(row, 'signal row').answer, 'signal answer');
  return { delivered: (answer.delivered as string[]) ?? [], keptEventId: answer.keptEventId === null ? null : Number(answer.keptEventId) };
}

export interface JobWait {
  jobId: string;
  name: string;
  key: string | null;
  step: string;
  since: Date;
  timeoutAt: Date | null;
}

/** What a job waits for, or null. */
export async function jobWaitRow(sql: Queryable, jobId: string): Promise<JobWait | null> {
  const [row] = await sql`select job_id, name, key, step, since, timeout_at from worker.job_waits where job_id = ${jobId}::uuid`;
  if (!row) return null;
  const r = record(row, 'job_waits row');
  return {
    jobId: text(r.job_id, 'job_id'),
    name: text(r.name, 'name'),
    key: textOrNull(r.key, 'key') || null,
    step: text(r.step, 'step'),
    since: time(r.since, 'since'),
    timeoutAt: timeOrNull(r.timeout_at, 'timeout_at'),
  };
}
