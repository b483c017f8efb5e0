import type { Queryable, Sql } from './db.ts';
import { type Pause, type PauseKind, pauseRow, pauseRows, rateLimitRows, type RateLimitState, resumeRow } from './driver/flow-control.ts';
import { translatePgError } from './errors.ts';

export type { Pause, PauseKind, RateLimitState } from './driver/flow-control.ts';

/**
 * Flow control an operator drives (docs/engine.md, "Flow control"): pause a job type or a pool
 * (claims skip it; queued jobs stay as they are and running ones finish) and resume it, each one
 * SQL function (worker.pause_claims, worker.resume_claims) that the CLI, HTTP and the dashboard
 * call. Refusals: SB400 ValidationError (kind, name, pausedBy, reason), SB404 an unknown type,
 * SB409 ConflictError (already paused, or not paused).
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
