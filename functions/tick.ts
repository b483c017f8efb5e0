import {
  alertStuckJobs, claimLeaderLease, deliverPendingAlerts, pruneFinished, rescueExpiredLeases, type LeaderLease, type RunCounts,
} from '../queue/index.ts';
import { drain, type Invocation } from './invocation.ts';
import { backfillSlots, checkSchedules, syncSchedules } from './schedules.ts';

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
    };
    maintenance.alertsSent = await deliverPendingAlerts(sql, inv.alerts);
  }
  const steps = await drain(inv, config.tickBudgetMs);
  return { leader, maintenance, steps };
}
