import type { Queryable } from '../db.ts';
import * as driver from '../driver/maintenance.ts';
import { statementNow, type MaintenanceService } from './service.ts';

/** The alert a job past its deadline opens (key: the job id). */
export const DEADLINE_MISSED = 'deadline_missed';

export interface DeadlineCounts {
  /** New deadline_missed alerts: jobs whose deadline passed since the last pass. */
  opened: number;
  /** Closed: their job ended (done, failed, cancelled, oom_killed) or is gone. */
  resolved: number;
}

/**
 * Open one deadline_missed alert for each job past its deadline and not ended (at most `limit`
 * a pass, the earliest deadlines first), carrying the job's severity; resolve the open ones
 * whose job has ended. A job gets at most one such alert in its life (a unique index): once
 * resolved, by its end or by an operator, it is never reopened, and concurrent passes open one.
 */
export async function alertMissedDeadlines(sql: Queryable, options: { limit?: number; now?: Date } = {}): Promise<DeadlineCounts> {
  const opened = await driver.openDeadlineAlerts(sql, options.limit ?? 1000, options.now);
  const resolved = await driver.resolveDeadlineAlerts(sql, options.now);
  return { opened, resolved };
}

export const deadlineService: MaintenanceService<DeadlineCounts> = {
  runOnce: (ctx) => alertMissedDeadlines(ctx.sql, { now: statementNow(ctx) }),
};
