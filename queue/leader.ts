import type { Queryable } from './db.ts';
import * as driver from './driver/leader.ts';

export interface LeaderLease {
  isLeader: boolean;
  /** renewed: we held it; acquired: it was free or expired (generation + 1); follower: someone else holds it. */
  outcome: 'renewed' | 'acquired' | 'follower';
  holder: string | null;
  generation: number;
  expiresAt: Date | null;
}

/** The lease's row as an operator reads it. */
export interface LeaderLeaseRow {
  holder: string | null;
  acquiredAt: Date | null;
  expiresAt: Date | null;
  generation: number;
}

/** Renew, acquire or follow (worker.claim_leader_lease). Sticky: a healthy leader keeps it. */
export async function claimLeaderLease(sql: Queryable, holder: string, options: { ttlMs?: number; now?: Date; name?: string } = {}): Promise<LeaderLease> {
  return driver.claimLeaderLease(sql, { holder, ttlMs: options.ttlMs ?? 300_000, name: options.name ?? 'default', now: options.now });
}

/** The admin call: expire the lease so the next tick of any deployment re-elects. */
export async function releaseLeaderLease(sql: Queryable, options: { now?: Date; name?: string } = {}): Promise<{ previousHolder: string | null }> {
  return { previousHolder: await driver.expireLeaderLease(sql, options.name ?? 'default', options.now) };
}

export async function readLeaderLease(sql: Queryable, name = 'default'): Promise<LeaderLeaseRow> {
  return driver.readLeaderLease(sql, name);
}
