import type { Queryable } from '../db.ts';
import * as driver from '../driver/maintenance.ts';
import { statementNow, type MaintenanceService } from './service.ts';

export interface StuckCounts {
  opened: number;
  resolved: number;
}

/**
 * Open a stuck_job alert for each job whose current step has been running longer than the
 * threshold (default 2 h), and resolve the ones whose job has moved on.
 */
export async function alertStuckJobs(sql: Queryable, options: { thresholdMs?: number; now?: Date } = {}): Promise<StuckCounts> {
  const thresholdMs = options.thresholdMs ?? 2 * 3_600_000;
  const opened = await driver.openStuckJobAlerts(sql, thresholdMs, options.now);
  const resolved = await driver.resolveStuckJobAlerts(sql, thresholdMs, options.now);
  return { opened, resolved };
}

export const stuckService: MaintenanceService<StuckCounts> = {
  runOnce: (ctx) => alertStuckJobs(ctx.sql, { thresholdMs: ctx.config.stuckJobMs, now: statementNow(ctx) }),
};
