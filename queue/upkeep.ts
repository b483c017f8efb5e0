import type { Queryable } from './db.ts';
import * as driver from './driver/maintenance.ts';

/**
 * The drain's due-time query: milliseconds until the next queued job runnable by `pool` falls
 * due (≤ 0: due now); null when nothing is queued.
 */
export async function nextDueInMs(sql: Queryable, pool: string, options: { now?: Date } = {}): Promise<number | null> {
  return driver.nextDueInMs(sql, pool, options.now);
}
