import type { Queryable } from '../db.ts';
import type { LeaderLease, LeaderLeaseRow } from '../leader.ts';
import { at } from './clock.ts';

/** worker.leader_lease and the lease's SQL functions: rows parsed once into the engine's types. */

interface ClaimRow {
  is_leader: boolean;
  outcome: LeaderLease['outcome'];
  holder: string | null;
  generation: string | number;
  expires_at: Date | null;
}

/** Renew, acquire or follow in one call of worker.claim_leader_lease. */
export async function claimLeaderLease(
  sql: Queryable,
  lease: { holder: string; ttlMs: number; name: string; now: Date | undefined },
): Promise<LeaderLease> {
  const [row] = await sql<ClaimRow[]>`
    select * from worker.claim_leader_lease(${lease.holder}, ${lease.ttlMs}::int, ${lease.now ?? null}::timestamptz, ${lease.name})`;
  // the function returns exactly one row (it upserts the lease's row)
  if (!row) throw new Error('worker.claim_leader_lease returned no row');
  return {
    isLeader: row.is_leader,
    outcome: row.outcome,
    holder: row.holder,
    generation: Number(row.generation),
    expiresAt: row.expires_at,
  };
}

/** Expire the lease now; the holder it had, or null when there was no lease row. */
export async function expireLeaderLease(sql: Queryable, name: string, now: Date | undefined): Promise<string | null> {
  const [row] = await sql<{ holder: string | null }[]>`
    with prev as (select holder from worker.leader_lease where name = ${name} for update)
    update worker.leader_lease l set expires_at = ${at(sql, now)} - interval '1 millisecond'
      from prev where l.name = ${name}
    returning prev.holder`;
  return row?.holder ?? null;
}

interface LeaseRow {
  holder: string | null;
  acquired_at: Date | null;
  expires_at: Date | null;
  generation: string | number;
}

/** The lease as stored; every field null (generation 0) when no deployment ever took it. */
export async function readLeaderLease(sql: Queryable, name: string): Promise<LeaderLeaseRow> {
  const [row] = await sql<LeaseRow[]>`select holder, acquired_at, expires_at, generation from worker.leader_lease where name = ${name}`;
  return {
    holder: row?.holder ?? null,
    acquiredAt: row?.acquired_at ?? null,
    expiresAt: row?.expires_at ?? null,
    generation: Number(row?.generation ?? 0),
  };
}
