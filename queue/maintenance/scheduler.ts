import { raiseAlert, resolveAlerts } from '../alert-rows.ts';
import type { Alerts } from '../alerts.ts';
import { retryContended } from '../database-errors.ts';
import type { Sql } from '../db.ts';
import type { ScheduleCheck, Schedule } from '../schedules.ts';
import { alertDeliveryService } from './alerts.ts';
import { deadlineService, type DeadlineCounts } from './deadlines.ts';
import { pruneService, type PruneCounts } from './prune.ts';
import { rescueService, type RescueCounts } from './rescue.ts';
import { backfillService, scheduleCheckService, syncSchedulesService } from './schedules.ts';
import type { MaintenanceConfig, MaintenanceContext, MaintenanceService } from './service.ts';
import { stuckService, type StuckCounts } from './stuck.ts';
import { unclaimedService, type UnclaimedAlertCounts } from './unclaimed.ts';
import { depthSnapshotService, eventRollupService, leaderChurnService, type LeaderChurnCounts } from './upkeep.ts';

/** The alert a maintenance pass that threw opens (key = the pass's name), resolved when it next succeeds. */
export const MAINTENANCE_FAILED = 'maintenance_failed';

/**
 * Tries of a pass that fails with contention (a deadlock with a runner, a lock timeout) before it
 * counts as failed. Every pass is a bounded pass meant to run again each tick, so running it again
 * now is what the next tick would do; each of its statements that met contention wrote nothing.
 */
export const MAINTENANCE_PASS_TRIES = 3;

/** The maintenance passes, in the order each run runs them. */
export const MAINTENANCE_PASSES = [
  'syncSchedules', 'rescued', 'backfilled', 'schedules', 'stuck', 'deadlines', 'unclaimed', 'pruned', 'leaderChurn', 'eventsRolledUp', 'depthSnapshot', 'alertsSent',
] as const;
export type MaintenancePass = (typeof MAINTENANCE_PASSES)[number];

/** What each pass returns when it succeeds. */
export interface MaintenanceCounts {
  syncSchedules: true;
  rescued: RescueCounts;
  /** The slot keys backfilled. */
  backfilled: string[];
  schedules: ScheduleCheck;
  stuck: StuckCounts;
  deadlines: DeadlineCounts;
  unclaimed: UnclaimedAlertCounts;
  pruned: PruneCounts;
  leaderChurn: LeaderChurnCounts;
  /** Events rolled up into the counters. */
  eventsRolledUp: number;
  depthSnapshot: true;
  /** Alerts sent. */
  alertsSent: number;
}

/** A pass that threw: its error message, scrubbed. */
export interface PassError {
  error: string;
}

export type MaintenanceResults = { [P in MaintenancePass]?: MaintenanceCounts[P] | PassError };

/** One service per pass: the type requires each pass to have one. */
export type MaintenanceServices = { [P in MaintenancePass]: MaintenanceService<MaintenanceCounts[P]> };

export const MAINTENANCE_SERVICES: MaintenanceServices = {
  syncSchedules: syncSchedulesService,
  rescued: rescueService,
  backfilled: backfillService,
  schedules: scheduleCheckService,
  stuck: stuckService,
  deadlines: deadlineService,
  unclaimed: unclaimedService,
  pruned: pruneService,
  leaderChurn: leaderChurnService,
  eventsRolledUp: eventRollupService,
  depthSnapshot: depthSnapshotService,
  // Last, so this run's alerts (a failed pass's among them) go out now. A webhook that is down
  // leaves them pending for the next run; it never stops the drain.
  alertsSent: alertDeliveryService,
};

export interface MaintenanceRunOptions {
  /** The run's one instant, handed to every pass. */
  now: Date;
  /** What database-stamped rows are compared against (MaintenanceContext.clock; default 'database'). */
  clock?: MaintenanceContext['clock'];
  schedules: readonly Schedule[];
  alerts: Alerts;
  config: MaintenanceConfig;
  /** One structured log line (the caller's sink: the Worker's scrubs it). */
  log(line: Record<string, unknown>): void;
  /** Removes secrets from a text before it is stored in a result or an alert. */
  scrub(text: string): string;
  /** The passes' services (default MAINTENANCE_SERVICES). */
  services?: MaintenanceServices;
}

export interface MaintenanceRun {
  /** Every pass's counts, or `{ error }` for one that threw. */
  results: MaintenanceResults;
  /** The passes that threw (each logged and alerted); the others still ran. */
  failed: MaintenancePass[];
}

/**
 * One maintenance run: every pass in MAINTENANCE_PASSES order, each handed the same context
 * (one `now`). Each pass is isolated: one that throws (a bad row, a missing privilege, a
 * statement timeout) is logged, opens or refreshes a `maintenance_failed` alert keyed by the
 * pass (scrubbed), and the other passes run anyway. The passes that succeeded then resolve their
 * alert from an earlier run, in one statement.
 */
export async function runMaintenance(sql: Sql, options: MaintenanceRunOptions): Promise<MaintenanceRun> {
  const ctx: MaintenanceContext = Object.freeze({
    sql, now: options.now, clock: options.clock ?? 'database', schedules: options.schedules, alerts: options.alerts, config: options.config,
  });
  const services = options.services ?? MAINTENANCE_SERVICES;
  const run: MaintenanceRun = { results: {}, failed: [] };
  for (const name of MAINTENANCE_PASSES) await runPass(ctx, options, run, name, services[name]);
  const succeeded = MAINTENANCE_PASSES.filter((p) => !run.failed.includes(p));
  await resolveAlerts(sql, { kind: MAINTENANCE_FAILED, keys: succeeded, now: ctx.now }).catch((error: unknown) => {
    options.log({ level: 'error', msg: 'resolving maintenance alerts failed', error: errorText(error) });
  });
  return run;
}

async function runPass<P extends MaintenancePass>(
  ctx: MaintenanceContext,
  options: MaintenanceRunOptions,
  run: MaintenanceRun,
  name: P,
  service: MaintenanceService<MaintenanceCounts[P]>,
): Promise<void> {
  try {
    run.results[name] = await retryContended(() => service.runOnce(ctx), {
      tries: MAINTENANCE_PASS_TRIES,
      onRetry: (error, failures, retryInMs) => {
        const code = (error as { code?: string }).code;
        options.log({ level: 'warn', msg: 'maintenance pass met contention, retrying', pass: name, error: errorText(error), code, failures, retryInMs });
      },
    });
  } catch (error) {
    run.failed.push(name);
    run.results[name] = { error: options.scrub(errorText(error)) };
    await recordPassFailure(ctx, options, name, error);
  }
}

export function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Log a pass's error and open (or see again) its alert; the alert's text scrubbed of secrets. */
async function recordPassFailure(ctx: MaintenanceContext, options: MaintenanceRunOptions, name: MaintenancePass, error: unknown): Promise<void> {
  const message = options.scrub(`maintenance pass ${name} failed: ${errorText(error)}`);
  const code = typeof error === 'object' && error !== null && 'code' in error && typeof error.code === 'string' ? error.code : undefined;
  options.log({ level: 'error', msg: 'maintenance pass failed', pass: name, error: errorText(error), ...(code !== undefined ? { code } : {}) });
  await raiseAlert(ctx.sql, {
    kind: MAINTENANCE_FAILED,
    key: name,
    message,
    detail: { pass: name, ...(code !== undefined ? { code } : {}) },
    refreshMessage: true,
    now: ctx.now,
  }).catch((alertError: unknown) => {
    // the database itself may be what failed: the log line above is the record then
    options.log({ level: 'error', msg: 'recording a maintenance failure failed', pass: name, error: errorText(alertError) });
  });
}
