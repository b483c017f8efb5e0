import type { Queryable } from '../db.ts';
import type { Job } from '../job.ts';
import { int, record, text, time, timeOrNull } from './rows.ts';

/**
 * Flow control's statements (0210): the rate-limited settle, pause and resume (SQL functions in
 * migrations/functions/, the one implementation), and what inspect, metrics and the dashboard
 * read of them.
 */

type Fenced = Pick<Job, 'id' | 'leaseToken'>;

export type RateLimitedSettle = 'paused' | 'no_key' | 'lost';

export async function settleRateLimitedRow(sql: Queryable, job: Fenced, retryAfterMs: number, error: string, now: Date | undefined): Promise<RateLimitedSettle> {
  const [row] = await sql`
    select worker.settle_rate_limited(${job.id}::uuid, ${job.leaseToken}::uuid, ${Math.round(retryAfterMs)}::bigint,
                                      ${error}::text, ${now ?? null}::timestamptz) as outcome`;
  const outcome = text(record(row, 'settle_rate_limited row').outcome, 'outcome');
  if (outcome !== 'paused' && outcome !== 'no_key' && outcome !== 'lost') throw new Error(`settle_rate_limited answered ${outcome}`);
  return outcome;
}

export type PauseKind = 'type' | 'pool';

export interface Pause {
  kind: PauseKind;
  name: string;
  pausedBy: string;
  pausedAt: Date;
  reason: string;
}

function parsePause(row: unknown): Pause {
  const r = record(row, 'worker.pauses row');
  const kind = text(r.kind, 'kind');
  if (kind !== 'type' && kind !== 'pool') throw new Error(`worker.pauses.kind is ${kind}`);
  return { kind, name: text(r.name, 'name'), pausedBy: text(r.paused_by, 'paused_by'), pausedAt: time(r.paused_at, 'paused_at'), reason: text(r.reason, 'reason') };
}

export async function pauseRow(sql: Queryable, kind: string, name: string, pausedBy: string, reason: string, now: Date | undefined): Promise<Pause> {
  const [row] = await sql`select * from worker.pause_claims(${kind}::text, ${name}::text, ${pausedBy}::text, ${reason}::text, ${now ?? null}::timestamptz)`;
  return parsePause(row);
}

export async function resumeRow(sql: Queryable, kind: string, name: string): Promise<Pause> {
  const [row] = await sql`select * from worker.resume_claims(${kind}::text, ${name}::text)`;
  return parsePause(row);
}

export async function pauseRows(sql: Queryable): Promise<Pause[]> {
  const rows = await sql`select * from worker.pauses order by kind, name`;
  return rows.map(parsePause);
}

export interface RateLimitState {
  key: string;
  limit: number;
  perMs: number;
  /** Steps of the key started in the window ending at `now`. */
  startedInWindow: number;
  /** Set while a provider's 429 holds the key (claims skip its jobs until then). */
  pausedUntil: Date | null;
  pauseReason: string | null;
  /** Queued jobs of the key (due or not). */
  queued: number;
}

export async function rateLimitRows(sql: Queryable, now: Date | undefined): Promise<RateLimitState[]> {
  const rows = await sql`
    with n as (select coalesce(${now ?? null}::timestamptz, now()) as now)
    select r.key, r.max_starts, r.per_ms,
           (select count(*) from unnest(r.starts) s where s > n.now - make_interval(secs => r.per_ms / 1000.0)) as started,
           case when r.paused_until > n.now then r.paused_until end as paused_until,
           case when r.paused_until > n.now then r.pause_reason end as pause_reason,
           (select count(*) from worker.jobs j where j.rate_key = r.key and j.status = 'queued') as queued
      from worker.rate_limits r, n
     order by r.key`;
  return rows.map((row) => {
    const r = record(row, 'rate_limits row');
    return {
      key: text(r.key, 'key'),
      limit: int(r.max_starts, 'max_starts'),
      perMs: int(r.per_ms, 'per_ms'),
      startedInWindow: int(r.started, 'started'),
      pausedUntil: timeOrNull(r.paused_until, 'paused_until'),
      pauseReason: r.pause_reason === null ? null : text(r.pause_reason, 'pause_reason'),
      queued: int(r.queued, 'queued'),
    };
  });
}

export interface RateKeyResumed {
  key: string;
  /** The end the pause had. */
  pausedUntil: Date;
  pauseReason: string | null;
  /** Jobs a 429 of the key had queued for the pause's end, due now. */
  jobsDue: number;
}

export async function resumeRateKeyRow(sql: Queryable, key: string, resumedBy: string, now: Date | undefined): Promise<RateKeyResumed> {
  const [row] = await sql`select * from worker.resume_rate_key(${key}::text, ${resumedBy}::text, ${now ?? null}::timestamptz)`;
  const r = record(row, 'resume_rate_key row');
  return {
    key: text(r.key, 'key'),
    pausedUntil: time(r.paused_until, 'paused_until'),
    pauseReason: r.pause_reason === null ? null : text(r.pause_reason, 'pause_reason'),
    jobsDue: int(r.jobs_due, 'jobs_due'),
  };
}

/** What a job type declares of flow control, for the types that declare a rate key or a fairness key. */
export interface TypeFlowKeys {
  rateKey: string | null;
  /** The fairness key's template (account:{accountId}). */
  fairKey: string | null;
}

export async function typeFlowKeyRows(sql: Queryable): Promise<Map<string, TypeFlowKeys>> {
  const rows = await sql`select type, rate_key, fair_key from worker.job_types where rate_key is not null or fair_key is not null order by type`;
  return new Map(rows.map((row) => {
    const r = record(row, 'job_types row');
    return [text(r.type, 'type'), { rateKey: r.rate_key === null ? null : text(r.rate_key, 'rate_key'), fairKey: r.fair_key === null ? null : text(r.fair_key, 'fair_key') }];
  }));
}
