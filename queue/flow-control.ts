import type { Queryable, Sql } from './db.ts';
import {
  type Pause, type PauseKind, pauseRow, pauseRows, type RateKeyResumed, rateLimitRows, type RateLimitState, resumeRateKeyRow, resumeRow, typeFlowKeyRows, type TypeFlowKeys,
} from './driver/flow-control.ts';
import { translatePgError } from './errors.ts';

export type { Pause, PauseKind, RateKeyResumed, RateLimitState, TypeFlowKeys } from './driver/flow-control.ts';

/**
 * Flow control an operator drives (docs/engine.md, "Flow control"): pause a job type or a pool
 * (claims skip it; queued jobs stay as they are and running ones finish) and resume it, each one
 * SQL function (worker.pause_claims, worker.resume_claims) that the CLI, HTTP and the dashboard
 * call; and end a rate key's pause (a 429's) early (worker.resume_rate_key). Refusals: SB400
 * ValidationError (kind, name, pausedBy, reason, key), SB404 an unknown type or rate key, or a
 * pool nothing defines (no capacity row, no job naming it), SB409 ConflictError (already paused,
 * or not paused).
 */
async function translated<T>(op: () => Promise<T>): Promise<T> {
  try {
    return await op();
  } catch (error) {
    throw translatePgError(error);
  }
}

export interface PauseInput {
  kind: PauseKind;
  name: string;
  /** Who paused it (an operator's name, `ops`, `dashboard`). */
  pausedBy: string;
  reason: string;
}

export function pauseClaims(sql: Sql, input: PauseInput, options: { now?: Date } = {}): Promise<Pause> {
  return translated(() => pauseRow(sql, input.kind, input.name, input.pausedBy, input.reason, options.now));
}

export function resumeClaims(sql: Sql, kind: PauseKind, name: string): Promise<Pause> {
  return translated(() => resumeRow(sql, kind, name));
}

/** Every pause in force, types first. */
export function listPauses(sql: Queryable): Promise<Pause[]> {
  return pauseRows(sql);
}

/** Every rate key: its limit, the starts in its current window, a 429's pause, its queued jobs. */
export function listRateLimits(sql: Queryable, options: { now?: Date } = {}): Promise<RateLimitState[]> {
  return rateLimitRows(sql, options.now);
}

/**
 * End a rate key's pause now (set by a provider's 429): claims take its jobs again within its
 * limit, and the jobs the 429 queued for the pause's end are due now (a `resumed` event each).
 */
export function resumeRateKey(sql: Sql, key: string, resumedBy: string, options: { now?: Date } = {}): Promise<RateKeyResumed> {
  return translated(() => resumeRateKeyRow(sql, key, resumedBy, options.now));
}

/** The rate key and fairness key each job type declares, by type (only the types that declare one). */
export function typeFlowKeys(sql: Queryable): Promise<Map<string, TypeFlowKeys>> {
  return typeFlowKeyRows(sql);
}
