import type { Queryable } from '../db.ts';
import * as driver from '../driver/maintenance.ts';
import { translatePgError } from '../errors.ts';
import { statementNow, type MaintenanceService } from './service.ts';

export interface UnclaimedAlertOptions {
  /** A job due for longer than this and still unclaimed is alerted (default 15 min). */
  thresholdMs?: number;
  /** At most this many waiting jobs read per pass (default 10,000). */
  limit?: number;
  now?: Date;
}

export interface UnclaimedAlertCounts {
  /** New unclaimed_jobs alerts (one per type and pool). */
  opened: number;
  /** Open ones seen again: their count and oldest job brought up to date. */
  refreshed: number;
  /** Closed: no job of their type and pool waits past the threshold any more. */
  resolved: number;
}

/**
 * Open one unclaimed_jobs alert per (type, pool) whose jobs have been due longer than the
 * threshold without a claim (no runner for the type or pool, a disabled or too small pool, a pool
 * whose max_weight is below the jobs' class, too few runners), and resolve the ones whose jobs were claimed, ended or rescheduled. Jobs that
 * wait by design (their concurrency key at its limit, or behind the active job of their dedupe
 * key) do not count. One bounded pass (worker.alert_unclaimed_jobs, migrations/0083).
 */
export async function alertUnclaimedJobs(sql: Queryable, options: UnclaimedAlertOptions = {}): Promise<UnclaimedAlertCounts> {
  try {
    return await driver.alertUnclaimedJobs(sql, { thresholdMs: options.thresholdMs ?? 900_000, limit: options.limit ?? 10_000, now: options.now });
  } catch (error) {
    throw translatePgError(error);
  }
}

export const unclaimedService: MaintenanceService<UnclaimedAlertCounts> = {
  runOnce: (ctx) => alertUnclaimedJobs(ctx.sql, { thresholdMs: ctx.config.unclaimedJobMs, now: statementNow(ctx) }),
};
