// Postgres matrix: the leader lease under concurrent holders.
import { beforeAll, describe, expect, it } from 'vitest';
import { claimLeaderLease, readLeaderLease, releaseLeaderLease } from '../../queue/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});

const T0 = new Date('2026-11-30T12:00:00Z');
const at = (min: number) => new Date(T0.getTime() + min * 60_000);
const TTL = 5 * 60_000;

describe('leader lease', () => {
  it('acquires a free lease, renews while held, follows while another holds it, takes over after expiry, never fails back', async () => {
    const a1 = await claimLeaderLease(db.sql, 'pool-a', { ttlMs: TTL, now: at(0), name: 'l1' });
    expect(a1).toMatchObject({ isLeader: true, outcome: 'acquired', holder: 'pool-a', generation: 1 });

    const a2 = await claimLeaderLease(db.sql, 'pool-a', { ttlMs: TTL, now: at(2), name: 'l1' });
    expect(a2).toMatchObject({ isLeader: true, outcome: 'renewed', generation: 1 });
    expect(a2.expiresAt!.getTime()).toBe(at(7).getTime());
    const lease = await readLeaderLease(db.sql, 'l1');
    expect(lease.acquiredAt!.getTime()).toBe(at(0).getTime()); // renewal keeps acquired_at

    const b1 = await claimLeaderLease(db.sql, 'pool-b', { ttlMs: TTL, now: at(4), name: 'l1' });
    expect(b1).toMatchObject({ isLeader: false, outcome: 'follower', holder: 'pool-a', generation: 1 });

    const b2 = await claimLeaderLease(db.sql, 'pool-b', { ttlMs: TTL, now: at(8), name: 'l1' });
    expect(b2).toMatchObject({ isLeader: true, outcome: 'acquired', holder: 'pool-b', generation: 2 });

    // sticky: the old leader comes back healthy and stays a follower
    const a3 = await claimLeaderLease(db.sql, 'pool-a', { ttlMs: TTL, now: at(9), name: 'l1' });
    expect(a3).toMatchObject({ isLeader: false, outcome: 'follower', holder: 'pool-b' });
  });

  it('a holder whose own lease expired re-acquires with a new generation', async () => {
    await claimLeaderLease(db.sql, 'solo', { ttlMs: TTL, now: at(0), name: 'l2' });
    const again = await claimLeaderLease(db.sql, 'solo', { ttlMs: TTL, now: at(6), name: 'l2' });
    expect(again).toMatchObject({ outcome: 'acquired', generation: 2 });
  });

  it('the admin release expires the lease so the next claimer takes it', async () => {
    await claimLeaderLease(db.sql, 'pool-a', { ttlMs: TTL, now: at(0), name: 'l3' });
    expect(await releaseLeaderLease(db.sql, { now: at(1), name: 'l3' })).toEqual({ previousHolder: 'pool-a' });
    const b = await claimLeaderLease(db.sql, 'pool-b', { ttlMs: TTL, now: at(1), name: 'l3' });
    expect(b).toMatchObject({ isLeader: true, outcome: 'acquired', generation: 2 });
  });

  it('gives the lease to exactly one of 10 concurrent claimers', async () => {
    const clients = Array.from({ length: 10 }, () => db.client(1));
    const results = await Promise.all(clients.map((sql, i) => claimLeaderLease(sql, `c${i}`, { ttlMs: TTL, name: 'l4' })));
    expect(results.filter((r) => r.isLeader)).toHaveLength(1);
    expect(new Set(results.map((r) => r.holder)).size).toBe(1);
  });
});
