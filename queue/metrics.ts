import type { Queryable } from './db.ts';
import { readLeaderLease } from './leader.ts';
import type { DeadlineSeverity, JobStatus } from './job.ts';
import { rollupJobEvents } from './maintenance/upkeep.ts';
import * as driver from './driver/metrics.ts';
import { type Pause, pauseRows, rateLimitRows, type RateLimitState } from './driver/flow-control.ts';

/**
 * The metrics read model: every number read from Postgres at once, so any reader of the fleet
 * sees the same (the queries are queue/driver/metrics.ts's).
 */
export interface MetricsSnapshot {
  /** Every registered job type, sorted. */
  types: string[];
  /** Jobs by status and type (rows currently retained). */
  depth: { status: JobStatus; type: string; n: number }[];
  /** Jobs in progress (started, not finished) by status — running, or queued between steps — and type; none absent. */
  inProgress: { status: JobStatus; type: string; n: number }[];
  /** Queued jobs that are due. */
  due: number;
  /** Seconds the oldest due queued job has waited since its run_at (0 when none). */
  oldestQueuedSeconds: number;
  /** Seconds the longest-running step has run (0 when none). */
  oldestRunningSeconds: number;
  /** Running jobs past the stuck threshold, by type (types with none absent). */
  stuck: { type: string; n: number }[];
  /** Jobs past their deadline and not ended, by type and severity (pairs with none absent). */
  pastDeadline: { type: string; severity: DeadlineSeverity; n: number }[];
  /** The step duration histogram's upper bounds, in seconds. */
  stepBounds: number[];
  /** Step counts and total seconds by type, outcome and histogram bucket (an index into stepBounds; one past for +Inf). */
  steps: { type: string; outcome: string; bucket: number; steps: number; seconds: number }[];
  /** Per-type counters: retry, poison, oom_killed. */
  counters: { type: string; counter: string; n: number }[];
  schedules: { name: string; lastSuccessAt: Date | null; missed: boolean }[];
  leader: { holder: string | null; generation: number; expiresAt: Date | null };
  /** Alerts opened and open now, by kind. */
  alerts: { kind: string; fired: number; open: number }[];
  /** When the leader's tick last recorded the queue's depth; null if never. */
  lastTickAt: Date | null;
  /** Paused job types and pools (0210). */
  pauses: Pause[];
  /** Every rate key: its window's starts and a 429's pause. */
  rateLimits: RateLimitState[];
}

export async function readMetrics(sql: Queryable, options: { stuckJobMs: number; now?: Date }): Promise<MetricsSnapshot> {
  // Keep the tail short for the readers below; skipped when another roll-up holds the row.
  await rollupJobEvents(sql, options.now ? { now: options.now } : {});
  const [readings, lease, pauses, rateLimits] = await Promise.all([
    driver.readMetricReadings(sql, { stuckJobMs: options.stuckJobMs, now: options.now }),
    readLeaderLease(sql),
    pauseRows(sql),
    rateLimitRows(sql, options.now),
  ]);
  return { ...readings, pauses, rateLimits, leader: { holder: lease.holder, generation: lease.generation, expiresAt: lease.expiresAt } };
}
