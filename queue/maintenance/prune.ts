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
  /**
   * Keep a signal event no wait has taken this long (default: finishedRetentionMs, 7 days); an
   * older one is dropped unconsumed and counted in `signalEventsExpired`.
   */
  keptSignalRetentionMs?: number;
  /** At most this many rows of each kind per pass, so one pass stays short. */
  limit?: number;
  now?: Date;
}

export interface PruneCounts {
  jobs: number;
  events: number;
  /** Waits (worker.job_waits) of jobs that ended or are gone. */
  signalWaits: number;
  /** Kept signal events of jobs that ended or are gone: no wait can take them any more. */
  signalEvents: number;
  /** Kept signal events older than keptSignalRetentionMs, dropped before any wait took them. */
  signalEventsExpired: number;
  /** Signal channels with no wait and no kept event left on them. */
  signalChannels: number;
}

const DAY_MS = 86_400_000;

/** Delete finished jobs, events and the signals' rows past their retention; returns how many of each. */
export async function pruneFinished(sql: Queryable, options: PruneOptions = {}): Promise<PruneCounts> {
  const limit = options.limit ?? 10_000;
  const jobs = await driver.deleteFinishedJobs(sql, {
    finishedMs: options.finishedRetentionMs ?? 7 * DAY_MS,
    failedMs: options.failedRetentionMs ?? 30 * DAY_MS,
    limit,
    now: options.now,
  });
  const events = await driver.deleteOldEvents(sql, { retentionMs: options.eventRetentionMs ?? 30 * DAY_MS, limit, now: options.now });
  // after the jobs: the waits and events of the jobs this pass deleted go in the same pass
  const signals = await driver.pruneSignals(sql, {
    keptRetentionMs: options.keptSignalRetentionMs ?? options.finishedRetentionMs ?? 7 * DAY_MS,
    limit,
    now: options.now,
  });
  return { jobs, events, ...signals };
}

export const pruneService: MaintenanceService<PruneCounts> = {
  runOnce: (ctx) =>
    pruneFinished(ctx.sql, {
      finishedRetentionMs: ctx.config.finishedRetentionMs,
      failedRetentionMs: ctx.config.failedRetentionMs,
      eventRetentionMs: ctx.config.eventRetentionMs,
      keptSignalRetentionMs: ctx.config.keptSignalRetentionMs,
      now: statementNow(ctx),
    }),
};
