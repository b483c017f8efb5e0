import {
  claimLeaderLease, errorText, runMaintenance, type LeaderLease, type MaintenancePass, type MaintenanceResults, type RunCounts,
} from '../queue/index.ts';
import { ensureDispatcherArmed } from './dispatch/wake.ts';
import { drain, type Invocation } from './invocation.ts';
import { SCHEDULES, type Schedule } from './schedules.ts';

export { LEADER_CHURN, MAINTENANCE_FAILED, MAINTENANCE_PASSES, type MaintenancePass } from '../queue/index.ts';

/** The lease as the tick saw it; `unavailable` when the lease call itself failed (no maintenance then). */
export type TickLeader = Omit<LeaderLease, 'outcome'> & { outcome: LeaderLease['outcome'] | 'unavailable' };

export interface TickResult {
  leader: TickLeader;
  /** Null on a follower: maintenance runs on the leader only. A pass that threw is `{ error }`. */
  maintenance: MaintenanceResults | null;
  /** The passes that threw this tick (each logged and alerted); the others and the drain still ran. */
  failed: MaintenancePass[];
  /** The pool's shard 0: `armed` as found, `rearmed` (its alarm was lost), `off` (DISPATCH_SHARDS 0), `unavailable` (the call failed). */
  dispatcher: 'armed' | 'rearmed' | 'off' | 'unavailable';
  steps: RunCounts;
}

export interface TickOptions {
  /** The schedules to maintain (default: SCHEDULES). */
  schedules?: readonly Schedule[];
}

/**
 * The per-minute tick: take or renew the leader lease (holder = this deployment's pool), run the
 * engine's maintenance (runMaintenance: every pass isolated, one clock) on the leader only, then
 * re-arm the pool's dispatcher if its alarm was lost, then drain due steps for the time budget.
 * Overlapping ticks are safe: the lease decides who maintains, and claims never hand one job to
 * two owners. A tick whose lease call fails does no maintenance but still drains.
 */
export async function runTick(inv: Invocation, now: Date, options: TickOptions = {}): Promise<TickResult> {
  const { sql, config } = inv;
  const leader: TickLeader = await claimLeaderLease(sql, config.pool, { ttlMs: config.leaderLeaseMs }).catch((error: unknown): TickLeader => {
    inv.log({ level: 'error', msg: 'leader lease failed; draining without maintenance', error: errorText(error) });
    return { isLeader: false, outcome: 'unavailable', holder: null, generation: 0, expiresAt: null };
  });
  const run = leader.isLeader
    ? await runMaintenance(sql, { now, schedules: options.schedules ?? SCHEDULES, alerts: inv.alerts, config, log: inv.log, scrub: inv.scrub })
    : null;
  const dispatcher = await checkDispatcher(inv);
  const steps = await drain(inv, config.tickBudgetMs);
  return { leader, maintenance: run?.results ?? null, failed: run?.failed ?? [], dispatcher, steps };
}

async function checkDispatcher(inv: Invocation): Promise<TickResult['dispatcher']> {
  if (inv.config.dispatchShards === 0) return 'off';
  try {
    return (await ensureDispatcherArmed(inv.env, inv.config.pool)) ? 'rearmed' : 'armed';
  } catch (error) {
    inv.log({ level: 'error', msg: 'the dispatcher could not be re-armed', error: errorText(error) });
    return 'unavailable';
  }
}
