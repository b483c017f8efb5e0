// Postgres matrix: the claim (resource escalation).
import { beforeAll, describe, expect, it } from 'vitest';
import { claimJobs, enqueue, getJob, rescueExpiredLeases } from '../../queue/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';

// Escalation after a crash never turns a job into one no claim can take.

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
  await db.sql`insert into worker.pool_capacity (pool, enabled, max_running_weight) values ('tiny', true, 7), ('roomy', true, 11)`;
});

const T0 = new Date('2031-05-01T08:00:00Z');
const at = (ms: number) => new Date(T0.getTime() + ms);
const LEASE = 120_000;

/** Queued jobs pinned to a pool whose capacity is below their class's cost: no claim can ever take them. */
async function unclaimable() {
  return db.sql`
    select j.id, j.weight, j.pool from worker.jobs j
      join worker.weight_classes w on w.name = j.weight
      join worker.pool_capacity pc on pc.pool = j.pool
     where j.status = 'queued' and w.cost > pc.max_running_weight`;
}

describe('escalation within what the pool can run', () => {
  it('a light job in a pool of capacity 7 (GB) is not escalated to heavy (8): it ends oom_killed with a lease_oom alert naming the pool', async () => {
    const { job } = await enqueue(db.sql, { type: 'uppercase', payload: { text: 'tiny' }, pool: 'tiny', maxAttempts: 5 }, { now: T0 });
    const [claimed] = await claimJobs(db.sql, { workerId: 'crashes', pool: 'tiny', limit: 1, now: at(0) });
    expect(claimed!.id).toBe(job.id);

    expect(await rescueExpiredLeases(db.sql, { now: at(LEASE + 1) })).toEqual({ requeued: 0, failed: 0, oomKilled: 1 });
    expect(await unclaimable()).toHaveLength(0);
    const after = (await getJob(db.sql, job.id))!;
    expect(after.job).toMatchObject({ status: 'oom_killed', weight: 'light', crashes: 1 });
    expect(after.job.lastError).toMatch(/pool tiny cannot run its escalation \(heavy costs 8, max_running_weight 7\)/);
    expect(after.events.map((e) => e.kind)).toEqual(['enqueued', 'claimed', 'lease_expired', 'oom_killed']);
    expect(after.events.at(-1)!.detail).toMatchObject({ weight: 'light', next: 'heavy', nextCost: 8, pool: 'tiny', maxRunningWeight: 7, maxWeight: null });
    const [alert] = await db.sql`select * from worker.alerts where job_id = ${job.id}`;
    expect(alert!.kind).toBe('lease_oom');
    expect(alert!.message).toMatch(/after its lease expired at light: its escalation, heavy \(cost 8\), does not fit pool tiny \(max_running_weight 7\)/);
  });

  it('the rescue inside a claim does the same: the pool never holds a job it cannot claim', async () => {
    const { job } = await enqueue(db.sql, { type: 'uppercase', payload: { text: 'tiny-2' }, pool: 'tiny', maxAttempts: 5 }, { now: T0 });
    await claimJobs(db.sql, { workerId: 'crashes', pool: 'tiny', limit: 1, now: at(0) });
    const next = await claimJobs(db.sql, { workerId: 'next', pool: 'tiny', limit: 1, now: at(LEASE + 1) });
    expect(next).toHaveLength(0);
    expect(await unclaimable()).toHaveLength(0);
    expect((await getJob(db.sql, job.id))!.job.status).toBe('oom_killed');
  });

  it('where the next class fits, a crash escalates as before; a crash at the top class ends oom_killed', async () => {
    const { job } = await enqueue(db.sql, { type: 'uppercase', payload: { text: 'roomy' }, pool: 'roomy', maxAttempts: 5 }, { now: T0 });
    await claimJobs(db.sql, { workerId: 'crashes', pool: 'roomy', limit: 1, now: at(0) });
    expect(await rescueExpiredLeases(db.sql, { now: at(LEASE + 1) })).toEqual({ requeued: 1, failed: 0, oomKilled: 0 });
    expect((await getJob(db.sql, job.id))!.job).toMatchObject({ status: 'queued', weight: 'heavy' });
    const [again] = await claimJobs(db.sql, { workerId: 'crashes-again', pool: 'roomy', limit: 1, now: at(LEASE + 2) });
    expect(again).toMatchObject({ id: job.id, weight: 'heavy' });
    expect(await rescueExpiredLeases(db.sql, { now: at(2 * LEASE + 3) })).toEqual({ requeued: 0, failed: 0, oomKilled: 1 });
    expect((await getJob(db.sql, job.id))!.job.lastError).toMatch(/top weight class \(heavy, which escalates to none\)/);
  });

  it('an unpinned job escalates even after crashing in a small pool: other runners can take the next class', async () => {
    const { job } = await enqueue(db.sql, { type: 'uppercase', payload: { text: 'anywhere' }, maxAttempts: 5 }, { now: T0 });
    const [claimed] = await claimJobs(db.sql, { workerId: 'crashes', pool: 'tiny', limit: 1, now: at(0) });
    expect(claimed!.id).toBe(job.id);
    expect(await rescueExpiredLeases(db.sql, { now: at(LEASE + 1) })).toEqual({ requeued: 1, failed: 0, oomKilled: 0 });
    const [elsewhere] = await claimJobs(db.sql, { workerId: 'big', pool: null, limit: 1, now: at(LEASE + 2) });
    expect(elsewhere).toMatchObject({ id: job.id, weight: 'heavy' });
  });
});
