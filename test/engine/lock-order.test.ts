// Postgres matrix: the one lock order, under the interleavings that once deadlocked.
import { z } from 'zod';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { cancelJob, claimJobs, defineJobType, done, enqueue, JobRegistry, spawn, spawnChildren, type Job, type Sql } from '../../queue/index.ts';
import { runStaged } from '../../scripts/lib/lock-stages.ts';
import { truncateEngineTables } from '../../queue/driver/tables.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';

/**
 * A cancel that reaches a job's children — one (worker.cancel_job) or in bulk
 * (worker.bulk_cancel) — against a child's settle that ends its parent's join (the child's row,
 * then the parent's), in the interleaving that once made PostgreSQL abort one of them with a
 * deadlock: one child's row held by a transaction stalled between two statements, the cancel,
 * then the sibling's settle. Both finish now, because every lock of a parent comes after the
 * locks of the children it waits for (worker.lock_job_trees, docs/engine.md "Lock order").
 */

const T0 = new Date('2031-07-01T08:00:00Z');
const types = new JobRegistry([
  defineJobType({ type: 'lock_parent', payload: z.object({ n: z.number() }), async run() { return done(); } }),
  defineJobType({ type: 'lock_child', payload: z.object({ n: z.number() }), async run() { return done(); } }),
]);

let db: TestDatabase;
let sql: Sql;
const clients: Sql[] = [];
beforeAll(async () => {
  db = await createTestDatabase();
  sql = db.sql;
  await types.sync(sql);
  for (let i = 0; i < 3; i++) clients.push(db.client(1));
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.end({ timeout: 5 })));
});
beforeEach(async () => {
  await truncateEngineTables(sql);
});

/** `parents` parents, each with two running children and a join of the first to end. */
async function families(parents: number): Promise<Array<{ parent: Job; children: Job[] }>> {
  for (let n = 0; n < parents; n++) await enqueue(sql, { type: 'lock_parent', payload: { n } }, { now: T0 });
  const claimed = await claimJobs(sql, { workerId: 'p', limit: parents, types: ['lock_parent'], now: T0 });
  for (const p of claimed) {
    await spawnChildren(sql, p, spawn([0, 1].map((n) => ({ type: 'lock_child', payload: { n } })), { next: 'joined', join: 'first' }), { now: T0 });
  }
  const children = await claimJobs(sql, { workerId: 'c', limit: parents * 2, types: ['lock_child'], now: T0 });
  const parentOf = new Map((await sql`select id, parent_id from worker.jobs where type = 'lock_child'`).map((r) => [r.id as string, r.parent_id as string]));
  return claimed.sort((a, b) => a.id.localeCompare(b.id)).map((parent) => ({
    parent,
    children: children.filter((c) => parentOf.get(c.id) === parent.id).sort((a, b) => a.id.localeCompare(b.id)),
  }));
}

const complete = (jobs: Job[]) => (c: Sql) =>
  c`select id from worker.complete_jobs(${c.json(jobs.map((j) => ({ id: j.id, token: j.leaseToken, result: {} })))}::jsonb, ${T0}::timestamptz)`;

async function statusOf(id: string) {
  const [r] = await sql`select status, cancel_requested_at is not null as cancel_requested from worker.jobs where id = ${id}`;
  return r as { status: string; cancel_requested: boolean };
}

function noErrors(results: Array<PromiseSettledResult<unknown>>) {
  return results.flatMap((r) => (r.status === 'rejected' ? [String((r.reason as Error).message)] : []));
}

describe('the lock order', () => {
  it('a bulk cancel of a parent and a settle of its child that ends the join both finish', async () => {
    const [{ parent, children: [c0, c1] }] = await families(1) as [{ parent: Job; children: [Job, Job] }];
    const results = await runStaged(sql, [
      { sql: clients[0]!, hold: c0.id },
      { sql: clients[1]!, run: (c) => c`select * from worker.bulk_cancel(${sql.json({ type: 'lock_parent' })}::jsonb, false, 'bulk cancel', 500, null, ${T0}::timestamptz)` },
      { sql: clients[2]!, run: complete([c1]) },
    ]);
    expect(noErrors(results)).toEqual([]);
    expect(await statusOf(c1.id)).toEqual({ status: 'done', cancel_requested: false });
    expect(await statusOf(c0.id)).toEqual({ status: 'running', cancel_requested: true });
    expect(await statusOf(parent.id)).toEqual({ status: 'queued', cancel_requested: true });
  });

  it('a bulk cancel of several parents and a batched settle of their children both finish', async () => {
    const fams = await families(3);
    const results = await runStaged(sql, [
      { sql: clients[0]!, hold: fams[0]!.children[0]!.id },
      { sql: clients[1]!, run: (c) => c`select * from worker.bulk_cancel(${sql.json({ type: 'lock_parent' })}::jsonb, false, 'bulk cancel', 500, null, ${T0}::timestamptz)` },
      { sql: clients[2]!, run: complete(fams.map((f) => f.children[1]!)) },
    ]);
    expect(noErrors(results)).toEqual([]);
    for (const f of fams) {
      expect(await statusOf(f.parent.id)).toEqual({ status: 'queued', cancel_requested: true });
      expect((await statusOf(f.children[1]!.id)).status).toBe('done');
      expect(await statusOf(f.children[0]!.id)).toEqual({ status: 'running', cancel_requested: true });
    }
  });

  it('two batched settles of children of the same two parents, crosswise in id order, both finish', async () => {
    // x sorts before a's children but is b's (adopted by its submit key), so by id alone the
    // first batch [x, a0] would take b's join row before a's, and the second [a1, b1] a's before b's
    await enqueue(sql, { type: 'lock_child', payload: { n: 9 }, submitKey: 'x' }, { now: T0 });
    for (const n of [0, 1]) await enqueue(sql, { type: 'lock_parent', payload: { n } }, { now: T0 });
    const [a, b] = (await claimJobs(sql, { workerId: 'p', limit: 2, types: ['lock_parent'], now: T0 })).sort((p, q) => p.id.localeCompare(q.id));
    await spawnChildren(sql, a!, spawn([0, 1].map((n) => ({ type: 'lock_child', payload: { n } })), { next: 'joined', join: 'first' }), { now: T0 });
    await spawnChildren(sql, b!, spawn([{ type: 'lock_child', payload: { n: 9 }, submitKey: 'x' }, { type: 'lock_child', payload: { n: 1 } }], { next: 'joined', join: 'all' }), { now: T0 });
    const kids = (await claimJobs(sql, { workerId: 'c', limit: 10, types: ['lock_child'], now: T0 })).sort((p, q) => p.id.localeCompare(q.id));
    const parentOf = new Map((await sql`select id, parent_id from worker.jobs where type = 'lock_child'`).map((r) => [r.id as string, r.parent_id as string]));
    const [x, a0, a1] = kids.filter((k) => parentOf.get(k.id) === a!.id || k === kids[0]) as [Job, Job, Job];
    const b1 = kids.find((k) => parentOf.get(k.id) === b!.id && k.id !== x.id)!;
    expect(parentOf.get(x.id)).toBe(b!.id);
    const results = await runStaged(sql, [
      // the second batch ends a's join and then waits for a's row, holding a's join row
      { sql: clients[0]!, hold: a!.id },
      { sql: clients[1]!, run: complete([a1, b1]) },
      { sql: clients[2]!, run: complete([x, a0]) },
    ]);
    expect(noErrors(results)).toEqual([]);
    for (const k of [x, a0, a1, b1]) expect((await statusOf(k.id)).status).toBe('done');
    const [joins] = await sql`select count(*) filter (where joined_at is not null)::int as joined from worker.child_joins`;
    expect(joins!.joined).toBe(2);
  });

  it('a cancel that waits on a spawning settle reaches the children the spawn made meanwhile', async () => {
    // the parent spawns once (join 'first'); one child ends, the parent runs again and spawns
    // again while a cancel waits for its row
    const [family] = await families(1);
    const parent = family!.parent;
    await complete([family!.children[0]!])(sql);
    const [again] = await claimJobs(sql, { workerId: 'p', limit: 1, types: ['lock_parent'], now: new Date(T0.getTime() + 1) });
    expect(again!.id).toBe(parent.id);
    let release!: () => void;
    const released = new Promise<void>((r) => { release = r; });
    let spawned!: () => void;
    const hasSpawned = new Promise<void>((r) => { spawned = r; });
    const spawning = clients[0]!.begin(async (tx) => {
      await spawnChildren(tx as unknown as Sql, again!, spawn([7, 8].map((n) => ({ type: 'lock_child', payload: { n } })), { next: 'joined', join: 'all' }), { now: T0 });
      spawned();
      await released;
    });
    await hasSpawned;
    const cancel = cancelJob(clients[1]!, parent.id, 'cancel meets a spawn', { now: T0 });
    for (const until = Date.now() + 20_000; Date.now() < until; await new Promise((r) => setTimeout(r, 5))) {
      const [w] = await sql`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`;
      if (w!.n > 0) break;
    }
    release();
    await spawning;
    await cancel;
    const children = await sql`select status, cancel_requested_at is not null as asked from worker.jobs where parent_id = ${parent.id} order by id`;
    // the first spawn's one open child and the two new ones: none left to run on
    expect(children.filter((c) => c.status === 'queued' || c.status === 'running').filter((c) => !c.asked)).toEqual([]);
    expect(children.filter((c) => c.status === 'cancelled')).toHaveLength(2);
  });

  it('one cancel of a parent and a settle of its child that ends the join both finish', async () => {
    const [{ parent, children: [c0, c1] }] = await families(1) as [{ parent: Job; children: [Job, Job] }];
    const results = await runStaged(sql, [
      { sql: clients[0]!, hold: c0.id },
      { sql: clients[1]!, run: (c) => cancelJob(c, parent.id, 'one cancel', { now: T0 }) },
      { sql: clients[2]!, run: complete([c1]) },
    ]);
    expect(noErrors(results)).toEqual([]);
    expect(await statusOf(parent.id)).toEqual({ status: 'queued', cancel_requested: true });
    expect((await statusOf(c1.id)).status).toBe('done');
  });
});
