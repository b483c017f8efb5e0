import type { Queryable } from '../db.ts';
import * as driver from '../driver/maintenance.ts';
import { statementNow, type MaintenanceService } from './service.ts';

export interface RescueCounts {
  requeued: number;
  failed: number;
  oomKilled: number;
}

/**
 * Expired leases: requeue one weight class up, or end oom_killed / failed (with alerts). A job
 * pinned to a pool climbs only to the largest class that pool can run; a crash there ends it
 * oom_killed, like a crash at the top class (migrations/0082).
 */
export async function rescueExpiredLeases(sql: Queryable, options: { limit?: number; now?: Date } = {}): Promise<RescueCounts> {
  return driver.rescueExpiredLeases(sql, options.limit ?? 1000, options.now);
}

export const rescueService: MaintenanceService<RescueCounts> = {
  runOnce: (ctx) => rescueExpiredLeases(ctx.sql, { now: statementNow(ctx) }),
};
