// Postgres matrix: child jobs and joins racing settles and cancels.
import { z } from 'zod';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  cancelJob, claimJobs, completeJob, defineJobType, done, enqueue, JobRegistry, jobChildren, next, PermanentError, requeueJob,
  runSteps, spawn, spawnChildren, ValidationError, type ChildOutcome, type Job, type Sql, type TransactionSql,
} from '../../queue/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';

/**
 * Child jobs with join (queue/children.ts, migrations/0200_children.sql), against the real
 * database: the parent is parked while its children run (no claims), the child that completes
 * the join makes the parent due in its own settle, and the parent reads each child's outcome.
 * The races: the last two children ending at once, a child ending while its parent is
 * cancelled, a child's settle written twice or rolled back.
 */

const T0 = new Date('2031-05-01T12:00:00Z');
let db: TestDatabase;
let sql: Sql;
let clock = T0;
const seen: { children: ChildOutcome[] }[] = [];
const cancelHooks: string[] = [];

const childPayload = z.object({ value: z.number(), fail: z.boolean().optional(), twoSteps: z.boolean().optional() });
const child = defineJobType({
  type: 'test_child',
  payload: childPayload,
  maxAttempts: 1,
  async run(ctx) {
    if (ctx.payload.fail) throw new PermanentError(`child ${ctx.payload.value} refused`);
    if (ctx.payload.twoSteps && ctx.step === 'start') return next('second', { delayMs: 3_600_000 });
    return done({ doubled: ctx.payload.value * 2 });
  },
  async onCancel(ctx) {
    cancelHooks.push(`child:${ctx.payload.value}`);
  },
});

const parentPayload = z.object({
  children: z.array(childPayload.extend({ submitKey: z.string().optional() })),
  join: z.union([z.literal('all'), z.literal('first'), z.number()]).optional(),
});
const parent = defineJobType({
  type: 'test_parent',
  payload: parentPayload,
  async run(ctx) {
    if (ctx.step === 'start') {
      return spawn(
        ctx.payload.children.map(({ submitKey, ...p }) => ({ type: 'test_child', payload: p, ...(submitKey ? { submitKey } : {}) })),
        { next: 'joined', join: ctx.payload.join ?? 'all', checkpoint: { spawnedAt: ctx.now().toISOString() } },
      );
    }
    const children = await ctx.children();
    seen.push({ children });
    return done({ statuses: children.map((c) => c.status) });
  },
  async onCancel() {
    cancelHooks.push('parent');
  },
});

const registry = new JobRegistry([child, parent]);
const run = (limit = 100) => runSteps({ sql, registry, workerId: 'test', clock: () => clock, concurrency: 4 }, { maxJobs: limit });

async function row(id: string) {
  const [r] = await sql`select status, step, run_at, attempts, parent_id, cancel_requested_at, finished_at from worker.jobs where id = ${id}`;
  return r!;
}
async function childIds(parentId: string): Promise<string[]> {
  return ((await jobChildren(sql, parentId))?.children ?? []).map((c) => c.id);
}
async function events(id: string, kind: string) {
  return sql`select detail from worker.job_history where job_id = ${id} and kind = ${kind} order by id`;
}
async function enqueueParent(payload: z.input<typeof parentPayload>) {
  return (await enqueue(sql, { type: 'test_parent', payload }, { now: clock })).job;
}
/** Claims the parent alone and runs its start step (spawning). */
async function spawnParent(payload: z.input<typeof parentPayload>): Promise<Job> {
  const job = await enqueueParent(payload);
  await runSteps({ sql, registry: new JobRegistry([parent]), workerId: 'parent-only', clock: () => clock }, { maxJobs: 1 });
  return job;
}
async function claimAll(type: string): Promise<Job[]> {
  return claimJobs(sql, { workerId: 'claimer', limit: 100, types: [type], now: clock });
}

beforeAll(async () => {
  db = await createTestDatabase();
  sql = db.sql;
  await registry.sync(sql);
});

afterEach(async () => {
  await sql`delete from worker.child_joins`;
  await sql`delete from worker.jobs`;
  seen.length = 0;
  cancelHooks.length = 0;
  clock = T0;
});

describe('spawn and join', () => {
  it('parks the parent while its children run and resumes it, due in the last child’s settle, with every outcome', async () => {
    const p = await spawnParent({ children: [{ value: 1 }, { value: 2, fail: true }, { value: 3 }] });
    const parked = await row(p.id);
    expect(parked).toMatchObject({ status: 'queued', step: 'joined', attempts: 0 });
    expect((parked.run_at as Date).getTime()).toBeNaN(); // infinity
    const ids = await childIds(p.id);
    expect(ids).toHaveLength(3);
    for (const id of ids) expect((await row(id)).parent_id).toBe(p.id);

    // Only the children are claimed while the parent waits.
    const claimedParent: string[] = [];
    const log = (l: { jobId: string }) => l.jobId === p.id && claimedParent.push(l.jobId);
    clock = new Date(T0.getTime() + 1000);
    await runSteps({ sql, registry: new JobRegistry([child, parent]), workerId: 'w', clock: () => clock, log }, { maxJobs: 3 });
    expect(claimedParent).toEqual([]);
    const woken = await row(p.id);
    const last = await sql`select max(finished_at) as at from worker.jobs where parent_id = ${p.id}`;
    expect(woken.run_at).toEqual(last[0]!.at);
    expect(await events(p.id, 'resumed')).toEqual([{ detail: expect.objectContaining({ step: 'joined', children: expect.objectContaining({ ended: 3, total: 3, join: 'all' }) }) }]);

    await run();
    expect((await row(p.id)).status).toBe('done');
    expect(seen).toHaveLength(1);
    expect(seen[0]!.children.map((c) => [c.status, c.result, c.lastError])).toEqual([
      ['done', { doubled: 2 }, null],
      ['failed', null, 'child 2 refused'],
      ['done', { doubled: 6 }, null],
    ]);
  });

  it('joins on the first child, or on a count, and leaves the others running', async () => {
    const first = await spawnParent({ children: [{ value: 1 }, { value: 2 }, { value: 3 }], join: 'first' });
    const [c1] = await claimAll('test_child');
    await completeJob(sql, c1!, { ok: 1 }, { now: clock });
    expect((await row(first.id)).run_at).toEqual(clock);
    const wait = await jobChildren(sql, first.id);
    expect(wait).toMatchObject({ join: 'first', need: 1, ended: 1, total: 3, joinedAt: clock });

    await sql`delete from worker.child_joins`;
    await sql`delete from worker.jobs`;
    const two = await spawnParent({ children: [{ value: 1 }, { value: 2 }, { value: 3 }], join: 2 });
    const claimed = await claimAll('test_child');
    await completeJob(sql, claimed[0]!, null, { now: clock });
    expect((await row(two.id)).run_at.getTime()).toBeNaN();
    await completeJob(sql, claimed[1]!, null, { now: clock });
    expect((await row(two.id)).run_at).toEqual(clock);
    await completeJob(sql, claimed[2]!, null, { now: clock }); // after the join: changes nothing
    expect(await events(two.id, 'resumed')).toHaveLength(1);
    expect(await jobChildren(sql, two.id)).toMatchObject({ need: 2, ended: 2 });
  });

  it('resumes at once with no children', async () => {
    const p = await spawnParent({ children: [] });
    expect((await row(p.id)).run_at).toEqual(clock);
    await run();
    expect((await row(p.id)).status).toBe('done');
    expect(seen[0]!.children).toEqual([]);
  });

  it('adopts a job its submit key names: created nothing, counted ended if it has', async () => {
    const earlier = (await enqueue(sql, { type: 'test_child', payload: { value: 7 }, submitKey: 'child:7' }, { now: clock })).job;
    await run();
    expect((await row(earlier.id)).status).toBe('done');
    const p = await spawnParent({ children: [{ value: 7, submitKey: 'child:7' }, { value: 8, submitKey: 'child:8' }] });
    const [spawned] = await events(p.id, 'checkpoint');
    expect(spawned!.detail.children).toMatchObject({ total: 2, created: 1, ended: 1 });
    expect(await childIds(p.id)).toEqual([earlier.id, expect.any(String)]);
    expect((await row(earlier.id)).parent_id).toBe(p.id); // it was nobody's child
    await run();
    expect(seen[0]!.children.map((c) => c.result)).toEqual([{ doubled: 14 }, { doubled: 16 }]);

    // A second parent re-running the same fan-out creates nothing and joins both (ended at once).
    const again = await spawnParent({ children: [{ value: 7, submitKey: 'child:7' }, { value: 8, submitKey: 'child:8' }] });
    expect(await jobChildren(sql, again.id)).toMatchObject({ total: 2, ended: 2, joinedAt: clock });
    expect((await row(earlier.id)).parent_id).toBe(p.id); // the first parent stays its parent
    const [{ n }] = (await sql`select count(*)::int as n from worker.jobs where type = 'test_child'`) as unknown as [{ n: number }];
    expect(n).toBe(2);
  });

  it('refuses a bad join with the field named and writes nothing', async () => {
    await enqueueParent({ children: [{ value: 1 }] });
    const [job] = await claimAll('test_parent');
    for (const join of [0, 2, 1.5]) {
      const error = await spawnChildren(sql, job!, spawn([{ type: 'test_child', payload: { value: 1 } }], { next: 'joined', join }), { now: clock }).catch((e) => e);
      expect(error).toBeInstanceOf(ValidationError);
      expect(error.field).toBe('join');
    }
    const error = await spawnChildren(sql, job!, spawn([{ type: 'test_child', payload: { value: 'x' } as never }], { next: 'joined' }), { now: clock }).catch((e) => e);
    expect(error).toBeInstanceOf(ValidationError);
    expect(error.field).toMatch(/^children\[0\]/);
    expect((await row(job!.id)).status).toBe('running');
    expect(await sql`select 1 from worker.jobs where type = 'test_child'`).toHaveLength(0);
    expect(await sql`select 1 from worker.child_joins`).toHaveLength(0);
  });

  it('a settle that lost its lease writes nothing', async () => {
    await enqueueParent({ children: [{ value: 1 }] });
    const [job] = await claimAll('test_parent');
    const settled = await spawnChildren(sql, { id: job!.id, leaseToken: '00000000-0000-0000-0000-000000000000' }, spawn([{ type: 'test_child', payload: { value: 1 } }], { next: 'joined' }), { now: clock });
    expect(settled).toBeNull();
    expect(await sql`select 1 from worker.jobs where type = 'test_child'`).toHaveLength(0);
  });

  it('a second spawn is a new wait: a late child of the first does not count for it', async () => {
    const p = await spawnParent({ children: [{ value: 1 }, { value: 2 }], join: 'first' });
    const firstKids = await claimAll('test_child');
    await completeJob(sql, firstKids[0]!, null, { now: clock });
    const [again] = await claimAll('test_parent');
    await spawnChildren(sql, again!, spawn([{ type: 'test_child', payload: { value: 3 } }], { next: 'joined' }), { now: clock });
    await completeJob(sql, firstKids[1]!, null, { now: clock });
    expect((await row(p.id)).run_at.getTime()).toBeNaN();
    expect(await jobChildren(sql, p.id)).toMatchObject({ waitNo: 2, ended: 0, total: 1 });
    expect(await jobChildren(sql, p.id, { waitNo: 1 })).toMatchObject({ ended: 1, total: 2 });
  });
});

describe('children that end badly, or again', () => {
  it('a child that fails, is oom_killed or is cancelled is an outcome, not a hang', async () => {
    const p = await spawnParent({ children: [{ value: 1 }, { value: 2 }, { value: 3 }] });
    const [a, b, c] = await childIds(p.id);
    await sql`select worker.fail_job(${a!}::uuid, 'operator gave up', ${clock}::timestamptz)`;
    await cancelJob(sql, b!, 'not needed', { now: clock });
    const [claimed] = await claimJobs(sql, { workerId: 'doomed', limit: 1, types: ['test_child'], now: clock });
    expect(claimed!.id).toBe(c);
    await sql`update worker.jobs set weight = 'heavy' where id = ${c!}`;
    clock = new Date(T0.getTime() + 3_600_000);
    await sql`select * from worker.rescue_expired_leases(100, ${clock}::timestamptz)`;
    expect((await row(c!)).status).toBe('oom_killed');
    expect((await row(p.id)).run_at).toEqual(clock);
    await run();
    expect(seen[0]!.children.map((x) => x.status)).toEqual(['failed', 'cancelled', 'oom_killed']);
  });

  it('a child requeued before the join no longer counts until it ends again', async () => {
    const p = await spawnParent({ children: [{ value: 1, fail: true }, { value: 2, twoSteps: true }] });
    await run(2); // child 1 fails; child 2 waits an hour between its steps
    expect(await jobChildren(sql, p.id)).toMatchObject({ ended: 1 });
    const [failed] = await childIds(p.id);
    await requeueJob(sql, failed!, { now: clock });
    expect(await jobChildren(sql, p.id)).toMatchObject({ ended: 0 });
    await sql`select worker.fail_job(${failed!}::uuid, 'again', ${clock}::timestamptz)`;
    expect(await jobChildren(sql, p.id)).toMatchObject({ ended: 1, joinedAt: null });
  });

  it('a child’s settle rolled back counts nothing; written twice it counts once', async () => {
    const p = await spawnParent({ children: [{ value: 1 }] });
    const [c] = await claimAll('test_child');
    await sql
      .begin(async (tx) => {
        await tx`select worker.complete_jobs(${tx.json([{ id: c!.id, token: c!.leaseToken, result: null }])}::jsonb, ${clock}::timestamptz)`;
        throw new Error('connection cut before commit');
      })
      .catch(() => {});
    expect(await jobChildren(sql, p.id)).toMatchObject({ ended: 0, joinedAt: null });
    expect(await completeJob(sql, c!, 1, { now: clock })).toBe(true);
    expect(await completeJob(sql, c!, 1, { now: clock })).toBe(false); // the retry after a lost answer: fenced
    expect(await jobChildren(sql, p.id)).toMatchObject({ ended: 1, joinedAt: clock });
    expect(await events(p.id, 'resumed')).toHaveLength(1);
  });
});

describe('races', () => {
  it('the last two children ending at once wake the parent exactly once', async () => {
    for (let round = 0; round < 5; round++) {
      await sql`delete from worker.child_joins`;
      await sql`delete from worker.jobs`;
      const p = await spawnParent({ children: [{ value: 1 }, { value: 2 }] });
      const [a, b] = await claimAll('test_child');
      const other = db.client(2);
      // Both settles in flight together: A's holds the wait row, B's waits for it and then sees A's count.
      await Promise.all([completeJob(sql, a!, 'a', { now: clock }), completeJob(other, b!, 'b', { now: clock })]);
      expect(await events(p.id, 'resumed')).toHaveLength(1);
      expect(await jobChildren(sql, p.id)).toMatchObject({ ended: 2, need: 2, joinedAt: clock });
      await other.end();
    }
  });

  it('two settles held open at once: the one committing second wakes the parent, once', async () => {
    const p = await spawnParent({ children: [{ value: 1 }, { value: 2 }] });
    const [a, b] = await claimAll('test_child');
    const other = db.client(2);
    const txA = await heldOpen((tx) => tx`select worker.complete_jobs(${tx.json([{ id: a!.id, token: a!.leaseToken, result: null }])}::jsonb, ${clock}::timestamptz)`);
    const bDone = completeJob(other, b!, null, { now: clock });
    await waitForLockWait(sql);
    await txA.commit();
    expect(await bDone).toBe(true);
    const [wait] = await sql`select ended, joined_by from worker.child_joins where parent_id = ${p.id}`;
    expect(wait).toEqual({ ended: 2, joined_by: b!.id });
    expect(await events(p.id, 'resumed')).toHaveLength(1);
    await other.end();
  });

  it('a child ending while its parent is cancelled: no deadlock, the child done, the rest cancelled', async () => {
    const p = await spawnParent({ children: [{ value: 1 }, { value: 2 }, { value: 3, twoSteps: true }] });
    const claimed = await claimAll('test_child');
    const byValue = new Map(claimed.map((j) => [(j.payload as { value: number }).value, j]));
    // child 3 runs its first step and waits between steps (started: its cancel hook must run)
    await sql`update worker.jobs set status = 'queued', step = 'second', run_at = 'infinity', locked_until = null where id = ${byValue.get(3)!.id}`;
    // child 2 goes back to never-started
    await sql`update worker.jobs set status = 'queued', started_at = null, locked_until = null where id = ${byValue.get(2)!.id}`;
    const other = db.client(2);
    const c1 = byValue.get(1)!;
    const settle = await heldOpen((tx) => tx`select worker.complete_jobs(${tx.json([{ id: c1.id, token: c1.leaseToken, result: null }])}::jsonb, ${clock}::timestamptz)`);
    const cancelled = cancelJob(other, p.id, 'month closed', { now: clock });
    await waitForLockWait(sql);
    await settle.commit();
    const job = await cancelled;
    expect(job.cancelRequestedAt).toEqual(clock);
    expect((await row(byValue.get(1)!.id)).status).toBe('done');
    expect((await row(byValue.get(2)!.id)).status).toBe('cancelled');
    expect(await row(byValue.get(3)!.id)).toMatchObject({ status: 'queued', cancel_requested_at: clock });
    const [reason] = await sql`select cancel_reason from worker.jobs where id = ${byValue.get(3)!.id}`;
    expect(reason!.cancel_reason).toBe(`parent ${p.id} cancelled: month closed`);
    // the cancel hooks run: the started child's and the parent's
    await run();
    expect(cancelHooks.sort()).toEqual(['child:3', 'parent']);
    expect((await row(p.id)).status).toBe('cancelled');
    expect((await row(byValue.get(3)!.id)).status).toBe('cancelled');
    await other.end();
  });

  it('a cancel that arrives while the parent’s step runs: the children its spawn then creates end cancelled, the parent runs its hook', async () => {
    await enqueueParent({ children: [{ value: 1 }, { value: 2 }] });
    const [job] = await claimAll('test_parent');
    await cancelJob(sql, job!.id, 'month closed', { now: clock }); // the step is still running
    const settled = await spawnChildren(sql, job!, spawn([{ type: 'test_child', payload: { value: 1 } }, { type: 'test_child', payload: { value: 2 } }], { next: 'joined' }), { now: clock });
    expect(settled).toMatchObject({ total: 2, created: 2 });
    const kids = await sql`select status, cancel_reason, finished_at from worker.jobs where parent_id = ${job!.id} order by id`;
    expect(kids).toEqual([1, 2].map(() => ({ status: 'cancelled', cancel_reason: `parent ${job!.id} cancelled: month closed`, finished_at: clock })));
    expect(await jobChildren(sql, job!.id)).toMatchObject({ ended: 2, joinedAt: clock });
    expect((await row(job!.id)).run_at).toEqual(clock); // due for its cancel hook, not parked
    await run();
    expect(cancelHooks).toEqual(['parent']); // the children never started: nothing of theirs to undo
    expect((await row(job!.id)).status).toBe('cancelled');
  });

  it('a cancel held open while a child settles: the settle waits, then completes; the other child has its request', async () => {
    const p = await spawnParent({ children: [{ value: 1 }, { value: 2 }] });
    const [a] = await claimAll('test_child');
    const other = db.client(2);
    const cancel = await heldOpen((tx) => tx`select worker.cancel_job(${p.id}::uuid, 'stop', ${clock}::timestamptz)`);
    const settle = completeJob(other, a!, null, { now: clock });
    await waitForLockWait(sql);
    await cancel.commit();
    expect(await settle).toBe(true);
    expect((await row(p.id)).cancel_requested_at).toEqual(clock);
    const children = await sql`select status, cancel_requested_at is not null as requested from worker.jobs where parent_id = ${p.id} and id <> ${a!.id}`;
    expect(children).toEqual([{ status: 'running', requested: true }]); // claimed too: its hook runs at its step's end
    expect((await row(a!.id)).status).toBe('done');
    await other.end();
  });
});

describe('pruning', () => {
  it('a deleted parent takes its waits and links with it', async () => {
    const p = await spawnParent({ children: [{ value: 1 }] });
    await run();
    clock = new Date(T0.getTime() + 40 * 86_400_000);
    await sql`select 1`; // the prune below is the maintenance statement itself
    const { deleteFinishedJobs } = await import('../../queue/driver/maintenance.ts');
    await deleteFinishedJobs(sql, { finishedMs: 86_400_000, failedMs: 86_400_000, limit: 100, now: clock });
    expect(await sql`select 1 from worker.jobs where id = ${p.id}`).toHaveLength(0);
    expect(await sql`select 1 from worker.child_joins`).toHaveLength(0);
    expect(await sql`select 1 from worker.job_children`).toHaveLength(0);
  });
});

/** Runs `statement` in a transaction left open (its locks held) until commit(). */
async function heldOpen(statement: (tx: TransactionSql) => Promise<unknown>): Promise<{ commit(): Promise<void> }> {
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  let inside!: () => void;
  const ran = new Promise<void>((r) => (inside = r));
  const tx = sql.begin(async (t) => {
    await statement(t);
    inside();
    await held;
  });
  await Promise.race([ran, tx]);
  return {
    async commit() {
      release();
      await tx;
    },
  };
}

/** Until some other backend of this database waits on a lock. */
async function waitForLockWait(s: Sql): Promise<void> {
  for (let i = 0; i < 1000; i++) {
    const rows = await s`select 1 from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`;
    if (rows.length > 0) return;
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error('no backend waited on a lock');
}
