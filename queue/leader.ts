import type { Queryable } from './db.ts';

export interface LeaderLease {
  isLeader: boolean;
  /** renewed: we held it; acquired: it was free or expired (generation + 1); follower: someone else holds it. */
  outcome: 'renewed' | 'acquired' | 'follower';
  holder: string | null;
  generation: number;
  expiresAt: Date | null;
}

/** Renew, acquire or follow (worker.claim_leader_lease). Sticky: a healthy leader keeps it. */
export async function claimLeaderLease(sql: Queryable, holder: string, options: { ttlMs?: number; now?: Date; name?: string } = {}): Promise<LeaderLease> {
  const [row] = await sql`
    select * from worker.claim_leader_lease(${holder}, ${options.ttlMs ?? 300_000}::int, ${options.now ?? null}::timestamptz,
                                            ${options.name ?? 'default'})`;
  return {
    isLeader: row!.is_leader as boolean,
    outcome: row!.outcome as LeaderLease['outcome'],
    holder: row!.holder as string | null,
    generation: Number(row!.generation),
    expiresAt: row!.expires_at as Date | null,
  };
}

/** The admin call: expire the lease so the next tick of any deployment re-elects. */
export async function releaseLeaderLease(sql: Queryable, options: { now?: Date; name?: string } = {}): Promise<{ previousHolder: string | null }> {
  const [row] = await sql`
    with prev as (select holder from worker.leader_lease where name = ${options.name ?? 'default'} for update)
    update worker.leader_lease l set expires_at = coalesce(${options.now ?? null}::timestamptz, now()) - interval '1 millisecond'
      from prev where l.name = ${options.name ?? 'default'}
    returning prev.holder`;
  return { previousHolder: (row?.holder as string | null) ?? null };
}

export async function readLeaderLease(sql: Queryable, name = 'default'): Promise<{ holder: string | null; acquiredAt: Date | null; expiresAt: Date | null; generation: number }> {
  const [row] = await sql`select holder, acquired_at, expires_at, generation from worker.leader_lease where name = ${name}`;
  return {
    holder: (row?.holder as string | null) ?? null,
    acquiredAt: (row?.acquired_at as Date | null) ?? null,
    expiresAt: (row?.expires_at as Date | null) ?? null,
    generation: Number(row?.generation ?? 0),
  };
}
