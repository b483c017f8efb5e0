import type { Queryable } from '../db.ts';
import * as driver from '../driver/maintenance.ts';
import { statementNow, type MaintenanceService } from './service.ts';

/** The run's small calls into SQL, each one statement returning typed counts. */

/** Leader churn: more acquisitions of the lease than this within the window opens a leader_churn alert. */
export const LEADER_CHURN = { maxChanges: 3, windowMs: 3_600_000 };

export interface LeaderChurnCounts {
  opened: number;
  resolved: number;
}

/** Leader churn: more acquisitions of the lease than `maxChanges` within the window opens a leader_churn alert (worker.check_leader_churn). */
export async function checkLeaderChurn(sql: Queryable, options: { maxChanges: number; windowMs: number; now?: Date }): Promise<LeaderChurnCounts> {
  return driver.checkLeaderChurn(sql, { maxChanges: options.maxChanges, windowMs: options.windowMs, now: options.now });
}

/**
 * Fold the settled tail of worker.job_events into the step and job counters; returns the events
 * rolled up (0 when another roll-up holds the row).
 */
export async function rollupJobEvents(sql: Queryable, options: { now?: Date } = {}): Promise<number> {
  return driver.rollupJobEvents(sql, options.now);
}

/** Record the queue's depth at `at` (the dashboard's depth chart). */
export async function recordDepthSnapshot(sql: Queryable, at: Date): Promise<void> {
  await driver.recordDepthSnapshot(sql, at);
}

export const leaderChurnService: MaintenanceService<LeaderChurnCounts> = {
  runOnce: (ctx) => checkLeaderChurn(ctx.sql, { ...(ctx.config.leaderChurn ?? LEADER_CHURN), now: statementNow(ctx) }),
};

export const eventRollupService: MaintenanceService<number> = {
  runOnce: (ctx) => rollupJobEvents(ctx.sql, { now: statementNow(ctx) }),
};

/** The depth chart's point is the run's instant whatever the clock: the chart's x axis is the tick's time. */
export const depthSnapshotService: MaintenanceService<true> = {
  async runOnce(ctx) {
    await recordDepthSnapshot(ctx.sql, ctx.now);
    return true;
  },
};
