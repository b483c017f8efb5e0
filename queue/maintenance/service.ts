import type { Alerts } from '../alerts.ts';
import type { Sql } from '../db.ts';
import type { Schedule } from '../schedules.ts';

/** The thresholds and retentions the passes run with (the Worker's config holds each). */
export interface MaintenanceConfig {
  /** A cron slot missed by at most this long is backfilled. */
  cronBackfillMs: number;
  /** A schedule's slot not done this long after it was due opens schedule_missed. */
  scheduleGraceMs: number;
  stuckJobMs: number;
  unclaimedJobMs: number;
  finishedRetentionMs: number;
  failedRetentionMs: number;
  eventRetentionMs: number;
  /** A signal event no wait took is dropped after this long (default finishedRetentionMs). */
  keptSignalRetentionMs?: number;
  /** More acquisitions of the leader lease than maxChanges within windowMs opens leader_churn (default LEADER_CHURN). */
  leaderChurn?: { maxChanges: number; windowMs: number };
}

/**
 * What every pass of one maintenance run is handed: the same object, so the same `now`.
 *
 * `now` is the run's one instant: cron slots are computed from it, and the alerts, the depth
 * snapshot and the failure alerts are stamped with it. `clock` says what the passes compare the
 * rows the database stamped (leases, claims, finished jobs, events) against: 'database' (the
 * tick) keeps the database's now(), the one clock every replica agrees on, so a Worker's late or
 * skewed trigger time never expires a lease or prunes a job early; 'pinned' (tests, the model)
 * gives those statements `now` too, so a whole run happens at one pinned instant.
 */
export interface MaintenanceContext {
  readonly sql: Sql;
  readonly now: Date;
  readonly clock: 'database' | 'pinned';
  readonly schedules: readonly Schedule[];
  readonly alerts: Alerts;
  readonly config: MaintenanceConfig;
}

/** One bounded pass of maintenance, returning what it did (River's maintenance services). */
export interface MaintenanceService<Counts> {
  runOnce(ctx: MaintenanceContext): Promise<Counts>;
}

/** The instant a pass's statements compare database-stamped rows against: undefined is the database's now(). */
export function statementNow(ctx: MaintenanceContext): Date | undefined {
  return ctx.clock === 'pinned' ? ctx.now : undefined;
}
