import type { Queryable } from '../db.ts';
import * as driver from '../driver/maintenance.ts';
import { statementNow, type MaintenanceService } from './service.ts';

export interface PruneOptions {
  /** Keep done and cancelled jobs this long after they finished (default 7 days). */
  finishedRetentionMs?: number;
  /** Keep failed and oom_killed jobs this long, for post-mortems (default 30 days). */
  failedRetentionMs?: number;
  /** Keep events this long (default 30 days). */
  eventRetentionMs?: number;
  /** At most this many rows of each kind per pass, so one pass stays short. */
  limit?: number;
  now?: Date;
}

export interface PruneCounts {
  jobs: number;
  events: number;
}

const DAY_MS = 86_400_000;

/** Delete finished jobs and events past their retention; returns how many of each. */
export async function pruneFinished(sql: Queryable, options: PruneOptions = {}): Promise<PruneCounts> {
  const limit = options.limit ?? 10_000;
  const jobs = await driver.deleteFinishedJobs(sql, {
    finishedMs: options.finishedRetentionMs ?? 7 * DAY_MS,
    failedMs: options.failedRetentionMs ?? 30 * DAY_MS,
    limit,
    now: options.now,
  });
  const events = await driver.deleteOldEvents(sql, { retentionMs: options.eventRetentionMs ?? 30 * DAY_MS, limit, now: options.now });
  return { jobs, events };
}

export const pruneService: MaintenanceService<PruneCounts> = {
  runOnce: (ctx) =>
    pruneFinished(ctx.sql, {
      finishedRetentionMs: ctx.config.finishedRetentionMs,
      failedRetentionMs: ctx.config.failedRetentionMs,
      eventRetentionMs: ctx.config.eventRetentionMs,
      now: statementNow(ctx),
    }),
};
