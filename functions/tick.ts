import {
  alertStuckJobs, claimLeaderLease, deliverPendingAlerts, pruneFinished, rescueExpiredLeases, type LeaderLease, type RunCounts,
} from '../queue/index.ts';
import { drain, type Invocation } from './invocation.ts';
import { backfillSlots, checkSchedules, syncSchedules } from './schedules.ts';

/** Leader churn: more acquisitions of the lease than this within the window opens an alert. */
export const LEADER_CHURN = { maxChanges: 3, windowMs: 3_600_000 };

export interface TickResult {
  leader: LeaderLease;
  /** Null on a follower: maintenance runs on the leader only. */
  maintenance: Record<string, unknown> | null;
  steps: RunCounts;
}

/**
 * The per-minute tick: take or renew the leader lease (holder = this deployment's pool), run the
 * maintenance passes on the leader only, then drain due steps for the time budget. Overlapping
 * ticks are safe: the lease decides who maintains, and claims never hand one job to two owners.
 */
export async function runTick(inv: Invocation, now: Date): Promise<TickResult> {
  const { sql, config } = inv;
  const leader = await claimLeaderLease(sql, config.pool, { ttlMs: config.leaderLeaseMs });
  let maintenance: TickResult['maintenance'] = null;
  if (leader.isLeader) {
    await syncSchedules(sql);
    maintenance = {
      rescued: await rescueExpiredLeases(sql),
      backfilled: (await backfillSlots(sql, now, config.cronBackfillMs)).map((s) => s.slotKey),
      schedules: await checkSchedules(sql, now, config.scheduleGraceMs),
      stuck: await alertStuckJobs(sql, { thresholdMs: config.stuckJobMs }),
      pruned: await pruneFinished(sql, {
        finishedRetentionMs: config.finishedRetentionMs,
        failedRetentionMs: config.failedRetentionMs,
        eventRetentionMs: config.eventRetentionMs,
      }),
      leaderChurn: (await sql`select * from worker.check_leader_churn(${LEADER_CHURN.maxChanges}, ${LEADER_CHURN.windowMs})`)[0],
      eventsRolledUp: (await sql`select worker.rollup_job_events() as n`)[0]!.n,
    };
    await sql`select worker.record_depth_snapshot(${now})`;
    // A webhook that is down must not stop the tick from draining: the alerts stay pending.
    maintenance.alertsSent = await deliverPendingAlerts(sql, inv.alerts).catch((error: Error) => {
      inv.log({ level: 'error', msg: 'alert delivery failed', error: error.message });
      return 0;
    });
  }
  const steps = await drain(inv, config.tickBudgetMs);
  return { leader, maintenance, steps };
}
