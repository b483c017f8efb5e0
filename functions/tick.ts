import {
  alertStuckJobs, alertUnclaimedJobs, checkLeaderChurn, claimLeaderLease, deliverPendingAlerts, pruneFinished, raiseAlert, recordDepthSnapshot,
  rescueExpiredLeases, resolveAlerts, rollupJobEvents, type LeaderLease, type RunCounts,
} from '../queue/index.ts';
import { drain, type Invocation } from './invocation.ts';
import { backfillSlots, checkSchedules, SCHEDULES, syncSchedules, type Schedule } from './schedules.ts';

/** Leader churn: more acquisitions of the lease than this within the window opens an alert. */
export const LEADER_CHURN = { maxChanges: 3, windowMs: 3_600_000 };

/** The alert a maintenance pass that threw opens (key = the pass's name), resolved when it next succeeds. */
export const MAINTENANCE_FAILED = 'maintenance_failed';

/** The leader's maintenance passes, in the order each tick runs them. */
export const MAINTENANCE_PASSES = [
  'syncSchedules', 'rescued', 'backfilled', 'schedules', 'stuck', 'unclaimed', 'pruned', 'leaderChurn', 'eventsRolledUp', 'depthSnapshot', 'alertsSent',
] as const;
export type MaintenancePass = (typeof MAINTENANCE_PASSES)[number];

/** The lease as the tick saw it; `unavailable` when the lease call itself failed (no maintenance then). */
export type TickLeader = Omit<LeaderLease, 'outcome'> & { outcome: LeaderLease['outcome'] | 'unavailable' };

export interface TickResult {
  leader: TickLeader;
  /** Null on a follower: maintenance runs on the leader only. A pass that threw is `{ error }`. */
  maintenance: Partial<Record<MaintenancePass, unknown>> | null;
  /** The passes that threw this tick (each logged and alerted); the others and the drain still ran. */
  failed: MaintenancePass[];
  steps: RunCounts;
}

export interface TickOptions {
  /** The schedules to maintain (default: SCHEDULES). */
  schedules?: readonly Schedule[];
}

/**
 * The per-minute tick: take or renew the leader lease (holder = this deployment's pool), run the
 * maintenance passes on the leader only, then drain due steps for the time budget. Overlapping
 * ticks are safe: the lease decides who maintains, and claims never hand one job to two owners.
 *
 * Each pass is isolated: one that throws (a bad row, a missing privilege, a statement timeout) is
 * logged with its error scrubbed, opens or refreshes a `maintenance_failed` alert keyed by the
 * pass, and the other passes and the drain run anyway. A tick whose lease call fails does no
 * maintenance but still drains.
 */
export async function runTick(inv: Invocation, now: Date, options: TickOptions = {}): Promise<TickResult> {
  const { sql, config } = inv;
  const schedules = options.schedules ?? SCHEDULES;
  const failed: MaintenancePass[] = [];
  let maintenance: TickResult['maintenance'] = null;

  const leader: TickLeader = await claimLeaderLease(sql, config.pool, { ttlMs: config.leaderLeaseMs }).catch((error: unknown): TickLeader => {
    inv.log({ level: 'error', msg: 'leader lease failed; draining without maintenance', error: errorText(error) });
    return { isLeader: false, outcome: 'unavailable', holder: null, generation: 0, expiresAt: null };
  });

  if (leader.isLeader) {
    const results: Partial<Record<MaintenancePass, unknown>> = {};
    const pass = async (name: MaintenancePass, run: () => Promise<unknown>): Promise<void> => {
      try {
        results[name] = await run();
      } catch (error) {
        failed.push(name);
        results[name] = { error: inv.scrub(errorText(error)) };
        await recordPassFailure(inv, name, error, now);
      }
    };
    await pass('syncSchedules', async () => {
      await syncSchedules(sql, schedules);
      return true;
    });
    await pass('rescued', () => rescueExpiredLeases(sql));
    await pass('backfilled', async () => (await backfillSlots(sql, now, config.cronBackfillMs, schedules)).map((s) => s.slotKey));
    await pass('schedules', () => checkSchedules(sql, now, config.scheduleGraceMs, schedules));
    await pass('stuck', () => alertStuckJobs(sql, { thresholdMs: config.stuckJobMs }));
    await pass('unclaimed', () => alertUnclaimedJobs(sql, { thresholdMs: config.unclaimedJobMs }));
    await pass('pruned', () =>
      pruneFinished(sql, {
        finishedRetentionMs: config.finishedRetentionMs,
        failedRetentionMs: config.failedRetentionMs,
        eventRetentionMs: config.eventRetentionMs,
      }));
    await pass('leaderChurn', () => checkLeaderChurn(sql, LEADER_CHURN));
    await pass('eventsRolledUp', () => rollupJobEvents(sql));
    await pass('depthSnapshot', async () => {
      await recordDepthSnapshot(sql, now);
      return true;
    });
    // Last but one, so this tick's alerts (a failed pass's among them) go out now. A webhook that
    // is down leaves them pending for the next tick; it never stops the drain.
    await pass('alertsSent', () => deliverPendingAlerts(sql, inv.alerts));
    // The passes that succeeded close their alert from an earlier tick (one statement for all).
    const succeeded = MAINTENANCE_PASSES.filter((p) => !failed.includes(p));
    await resolveAlerts(sql, { kind: MAINTENANCE_FAILED, keys: succeeded, now }).catch((error: unknown) => {
      inv.log({ level: 'error', msg: 'resolving maintenance alerts failed', error: errorText(error) });
    });
    maintenance = results;
  }
  const steps = await drain(inv, config.tickBudgetMs);
  return { leader, maintenance, failed, steps };
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Log a pass's error and open (or see again) its alert; both scrubbed of the env's secrets. */
async function recordPassFailure(inv: Invocation, name: MaintenancePass, error: unknown, now: Date): Promise<void> {
  const message = inv.scrub(`maintenance pass ${name} failed: ${errorText(error)}`);
  const code = (error as { code?: unknown } | null)?.code;
  inv.log({ level: 'error', msg: 'maintenance pass failed', pass: name, error: errorText(error), ...(typeof code === 'string' ? { code } : {}) });
  await raiseAlert(inv.sql, {
    kind: MAINTENANCE_FAILED,
    key: name,
    message,
    detail: { pass: name, ...(typeof code === 'string' ? { code } : {}) },
    refreshMessage: true,
    now,
  }).catch((alertError: unknown) => {
    // the database itself may be what failed: the log line above is the record then
    inv.log({ level: 'error', msg: 'recording a maintenance failure failed', pass: name, error: errorText(alertError) });
  });
}
