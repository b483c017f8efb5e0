import type { Queryable } from './db.ts';
import * as dispatch from './driver/dispatch.ts';
import * as driver from './driver/maintenance.ts';

/**
 * The drain's due-time query: milliseconds until the next queued job runnable by `pool` falls
 * due (≤ 0: due now); null when nothing is queued.
 */
export async function nextDueInMs(sql: Queryable, pool: string, options: { now?: Date } = {}): Promise<number | null> {
  return driver.nextDueInMs(sql, pool, options.now);
}

/** Queued steps runnable by `pool` that are due now, counted up to `cap` (the fan-out's question). */
export async function countDueSteps(sql: Queryable, pool: string, cap: number, options: { now?: Date } = {}): Promise<number> {
  return dispatch.countDue(sql, pool, Math.max(1, Math.floor(cap)), options.now);
}
