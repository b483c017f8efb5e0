import type { Queryable } from '../db.ts';
import * as driver from '../driver/maintenance.ts';
import { statementNow, type MaintenanceService } from './service.ts';

export interface RescueCounts {
  requeued: number;
  failed: number;
  oomKilled: number;
}

/**
 * Expired leases: requeue at the class's escalation target (light and playwright to heavy), or
 * end oom_killed (no target) / failed (final attempt), with alerts. A job pinned to a pool never
 * escalates to a class its pool cannot run (above its max_weight, or costing more than any of
 * its capacity): that crash ends it oom_killed, like a crash at heavy (migrations/0082, 0170).
 */
export async function rescueExpiredLeases(sql: Queryable, options: { limit?: number; now?: Date } = {}): Promise<RescueCounts> {
  return driver.rescueExpiredLeases(sql, options.limit ?? 1000, options.now);
}

export const rescueService: MaintenanceService<RescueCounts> = {
  runOnce: (ctx) => rescueExpiredLeases(ctx.sql, { now: statementNow(ctx) }),
};
