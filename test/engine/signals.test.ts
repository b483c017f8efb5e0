// Postgres matrix: signals racing waits and timeouts.
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  cancelJob, claimJobs, ConflictError, defineJobType, done, enqueue, getJob, JobRegistry, jobWait, NotFoundError, runSteps,
  sendEvent, signalJob, ValidationError, waitFor, type Job, type Runner, type StepContext, type WaitEvent,
} from '../../queue/index.ts';
import { settleWaitRow } from '../../queue/driver/signals.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';

let db: TestDatabase;
/** What each resumed step saw: the event and the handler's checkpoint. */
const seen = new Map<string, Array<{ step: string; event: WaitEvent | undefined; checkpoint: unknown }>>();

// start: wait for `payload.event` (with the payload's key and timeout), resume at `resumed`;
// resumed: record what it saw, then wait again when told to (`again`), else finish.
const waiter = defineJobType({
  type: 'signal_waiter',
  payload: z.object({ event: z.string(), key: z.string().optional(), timeoutMs: z.number().optional(), again: z.boolean().optional() }),
  async run(ctx: StepContext<{ event: string; key?: string; timeoutMs?: number; again?: boolean }>) {
    const { payload: p } = ctx;
    if (ctx.step === 'start') return waitFor(p.event, { key: p.key, timeoutMs: p.timeoutMs, step: 'resumed', checkpoint: { mine: 1 } });
    const list = seen.get(ctx.job.id) ?? [];
    list.push({ step: ctx.step, event: ctx.event, checkpoint: ctx.checkpoint });
    seen.set(ctx.job.id, list);
    if (p.again && list.length < 2) return waitFor(p.event, { key: p.key, step: 'resumed' });
    return done({ saw: ctx.event?.outcome ?? null });
  },
});
const registry = new JobRegistry([waiter]);

let clock = new Date('2031-03-01T10:00:00Z');
const now = () => clock;
const runner = (): Runner => ({ sql: db.sql, registry, workerId: 'signals-test', concurrency: 5, clock: now });

beforeAll(async () => {
  db = await createTestDatabase();
  await registry.sync(db.sql);
});

async function waiting(payload: { event: string; key?: string; timeoutMs?: number; again?: boolean }): Promise<Job> {
  await drain(); // the step run below is this job's
  const { job } = await enqueue(db.sql, { type: 'signal_waiter', payload }, { now: clock });
  await runSteps(runner(), { maxJobs: 1 });
  return (await getJob(db.sql, job.id))!.job;
}

/** Run every due step, so the next test starts with nothing due. */
async function drain(): Promise<void> {
  while ((await runSteps(runner(), { maxJobs: 50 })).claimed > 0);
}

const kinds = async (id: string) => (await getJob(db.sql, id))!.events.map((e) => e.kind);
const claimsOf = async (id: string) => (await kinds(id)).filter((k) => k === 'claimed').length;
const pending = async (name: string) => (await db.sql`select count(*)::int as n from worker.signal_events where name = ${name}`)[0]!.n as number;

describe('waitFor and signals', () => {
  it('parks the job, claims nothing while it waits, and resumes its step with the event', async () => {
    const name = `ev-${randomUUID()}`;
    const job = await waiting({ event: name });
    expect(job).toMatchObject({ status: 'queued', step: 'resumed' });
    expect(job.runAt.getTime()).toBeGreaterThan(Date.now() + 365 * 86_400_000); // infinity: no claim would take it
    expect(await jobWait(db.sql, job.id)).toMatchObject({ name, key: null, step: 'resumed', timeoutAt: null });

    clock = new Date(clock.getTime() + 7 * 86_400_000);
    expect((await runSteps(runner(), { maxJobs: 5 })).claimed).toBe(0);
    expect(await claimsOf(job.id)).toBe(1);

    const answer = await signalJob(db.sql, job.id, name, { payload: { ok: true }, now: clock });
    expect(answer).toEqual({ delivered: [job.id], keptEventId: null });
    expect(await jobWait(db.sql, job.id)).toBeNull();
    expect((await runSteps(runner(), { maxJobs: 5 })).done).toBe(1);
    expect(seen.get(job.id)).toEqual([
      { step: 'resumed', event: { outcome: 'signalled', name, key: null, payload: { ok: true }, at: expect.any(String) }, checkpoint: { mine: 1 } },
    ]);
    const { job: after, events } = (await getJob(db.sql, job.id))!;
    expect(after).toMatchObject({ status: 'done', result: { saw: 'signalled' } });
    expect(events.map((e) => e.kind)).toEqual(['enqueued', 'claimed', 'checkpoint', 'waiting', 'signalled', 'claimed', 'done']);
    expect(events.find((e) => e.kind === 'waiting')!.detail).toMatchObject({ name, step: 'resumed', timeoutAt: null });
    expect(events.find((e) => e.kind === 'signalled')!.detail).toMatchObject({ name, delivered: true, payload: { ok: true } });
  });

  it('keeps a signal sent to a job before it waits, and its wait takes it at once', async () => {
    const name = `ev-${randomUUID()}`;
    const { job } = await enqueue(db.sql, { type: 'signal_waiter', payload: { event: name } }, { now: clock });
    const early = await signalJob(db.sql, job.id, name, { payload: { n: 1 }, now: clock });
    expect(early.delivered).toEqual([]);
    expect(early.keptEventId).toEqual(expect.any(Number));
    await runSteps(runner(), { maxJobs: 1 }); // start: waits, takes the kept event
    const parked = (await getJob(db.sql, job.id))!.job;
    expect(parked.runAt.getTime()).toBe(clock.getTime()); // due now, not parked
    expect(await pending(name)).toBe(0);
    await runSteps(runner(), { maxJobs: 1 });
    expect(seen.get(job.id)![0]!.event).toMatchObject({ outcome: 'signalled', payload: { n: 1 } });
    expect(await kinds(job.id)).toEqual(['enqueued', 'signalled', 'claimed', 'checkpoint', 'waiting', 'signalled', 'claimed', 'done']);
  });

  it('delivers an event to every job waiting on (name, key), none on another key', async () => {
    const name = `ev-${randomUUID()}`;
    const a = await waiting({ event: name, key: 'k1' });
    const b = await waiting({ event: name, key: 'k1' });
    const c = await waiting({ event: name, key: 'k2' });
    const answer = await sendEvent(db.sql, name, { key: 'k1', payload: 'hi', now: clock });
    expect(answer.delivered.sort()).toEqual([a.id, b.id].sort());
    expect(answer.keptEventId).toBeNull();
    expect(await jobWait(db.sql, c.id)).toMatchObject({ key: 'k2' });
    expect((await runSteps(runner(), { maxJobs: 5 })).done).toBe(2);
    expect((await getJob(db.sql, c.id))!.job.status).toBe('queued');
  });

  it('keeps an event nobody waits on for the next wait on (name, key): one wait takes it, exactly once', async () => {
    const name = `ev-${randomUUID()}`;
    const kept = await sendEvent(db.sql, name, { key: 'x', payload: 1, now: clock });
    expect(kept).toEqual({ delivered: [], keptEventId: expect.any(Number) });
    const first = await waiting({ event: name, key: 'x' });
    const second = await waiting({ event: name, key: 'x' });
    expect(first.runAt.getTime()).toBe(clock.getTime()); // took the kept event
    expect(await jobWait(db.sql, first.id)).toBeNull();
    expect(await jobWait(db.sql, second.id)).toMatchObject({ name, key: 'x' });
    expect(await pending(name)).toBe(0);
    await drain();
  });

  it('resumes with a timed_out event when the timeout passes; a signal after it is kept for the next wait', async () => {
    const name = `ev-${randomUUID()}`;
    const job = await waiting({ event: name, timeoutMs: 60_000, again: true });
    expect(job.runAt.getTime()).toBe(clock.getTime() + 60_000);
    clock = new Date(clock.getTime() + 59_999);
    expect((await runSteps(runner(), { maxJobs: 5 })).claimed).toBe(0);
    clock = new Date(clock.getTime() + 1);
    // the timeout passed but no claim has come yet: the wait is over, the event is kept
    const late = await signalJob(db.sql, job.id, name, { payload: 'late', now: clock });
    expect(late.delivered).toEqual([]);
    await runSteps(runner(), { maxJobs: 1 }); // resumed: timed_out, then waits again and takes 'late'
    expect(seen.get(job.id)![0]!.event).toMatchObject({ outcome: 'timed_out', name, key: null });
    await runSteps(runner(), { maxJobs: 1 });
    expect(seen.get(job.id)![1]!.event).toMatchObject({ outcome: 'signalled', payload: 'late' });
    expect(await kinds(job.id)).toEqual([
      'enqueued', 'claimed', 'checkpoint', 'waiting', 'signalled', 'claimed', 'wait_timed_out', 'checkpoint', 'waiting', 'signalled', 'claimed', 'done',
    ]);
  });

  it('a retried resume step sees the same event again', async () => {
    const name = `ev-${randomUUID()}`;
    let failOnce = true;
    const flaky = defineJobType({
      type: 'signal_flaky',
      payload: z.object({}),
      async run(ctx) {
        if (ctx.step === 'start') return waitFor(name, { timeoutMs: 1000 });
        if (failOnce) {
          failOnce = false;
          throw new Error('blip');
        }
        return done({ event: ctx.event as unknown as Record<string, string> });
      },
      retry: { baseMs: 1, maxMs: 1 },
    });
    const reg = new JobRegistry([flaky]);
    await reg.sync(db.sql);
    const r: Runner = { sql: db.sql, registry: reg, workerId: 'flaky', clock: now };
    const { job } = await enqueue(db.sql, { type: 'signal_flaky', payload: {} }, { now: clock });
    await runSteps(r, { maxJobs: 1 });
    clock = new Date(clock.getTime() + 1000);
    expect((await runSteps(r, { maxJobs: 1 })).retried).toBe(1);
    // the wait ended with the timeout: an event now is kept, not taken by the retry
    expect((await signalJob(db.sql, job.id, name, { now: clock })).delivered).toEqual([]);
    clock = new Date(clock.getTime() + 10);
    expect((await runSteps(r, { maxJobs: 1 })).done).toBe(1);
    expect((await getJob(db.sql, job.id))!.job.result).toMatchObject({ event: { outcome: 'timed_out', name } });
    expect((await kinds(job.id)).filter((k) => k === 'wait_timed_out')).toHaveLength(1);
  });

  it('a cancelled waiting job runs its cancel path and takes no signal after', async () => {
    const name = `ev-${randomUUID()}`;
    const job = await waiting({ event: name });
    await cancelJob(db.sql, job.id, 'not needed', { now: clock });
    // a cancel is pending: the wait takes nothing, the event is kept (and dropped with the job)
    expect((await signalJob(db.sql, job.id, name, { now: clock })).delivered).toEqual([]);
    expect((await runSteps(runner(), { maxJobs: 1 })).cancelled).toBe(1);
    await expect(signalJob(db.sql, job.id, name)).rejects.toBeInstanceOf(ConflictError);
  });
});

describe('worker.signal from SQL and bad input', () => {
  it('signals from plain SQL, for one job and for a key', async () => {
    const name = `ev-${randomUUID()}`;
    const a = await waiting({ event: name, key: 'sql' });
    const [one] = await db.sql`select worker.signal(${name}, p_job_id => ${a.id}::uuid, p_payload => '{"x":1}') as answer`;
    expect(one!.answer).toEqual({ delivered: [a.id], keptEventId: null });
    const b = await waiting({ event: name, key: 'sql' });
    const [all] = await db.sql`select worker.signal(${name}, 'sql') as answer`;
    expect(all!.answer).toEqual({ delivered: [b.id], keptEventId: null });
    await drain();
  });

  it('refuses a blank name, an empty key, an unknown or ended job, writing nothing', async () => {
    const before = (await db.sql`select count(*)::int as n from worker.signal_events`)[0]!.n;
    await expect(sendEvent(db.sql, ' ')).rejects.toMatchObject({ constructor: ValidationError, field: 'name' });
    await expect(sendEvent(db.sql, 'x', { key: '' })).rejects.toMatchObject({ field: 'key' });
    await expect(sendEvent(db.sql, 'x'.repeat(201))).rejects.toMatchObject({ field: 'name' });
    await expect(signalJob(db.sql, randomUUID(), 'x')).rejects.toBeInstanceOf(NotFoundError);
    await expect(signalJob(db.sql, 'nope', 'x')).rejects.toBeInstanceOf(NotFoundError);
    const { job } = await enqueue(db.sql, { type: 'signal_waiter', payload: { event: 'x' } }, { now: clock });
    await cancelJob(db.sql, job.id);
    await expect(signalJob(db.sql, job.id, 'x')).rejects.toBeInstanceOf(ConflictError);
    expect((await db.sql`select count(*)::int as n from worker.signal_events`)[0]!.n).toBe(before);
    expect(() => waitFor('')).toThrow(/name/);
    expect(() => waitFor('x', { timeoutMs: 0 })).toThrow(/timeoutMs/);
  });
});

describe('races', () => {
  afterEach(drain);
  it('two signals at once to one waiting job: one is delivered, the other kept for its next wait', async () => {
    for (let i = 0; i < 10; i++) {
      const name = `ev-${randomUUID()}`;
      const job = await waiting({ event: name });
      const answers = await Promise.all([1, 2].map((n) => signalJob(db.sql, job.id, name, { payload: n, now: clock })));
      expect(answers.map((a) => a.delivered.length).sort()).toEqual([0, 1]);
      expect(await pending(name)).toBe(1);
      const delivered = (await getJob(db.sql, job.id))!.events.filter((e) => e.kind === 'signalled' && e.detail.delivered === true);
      expect(delivered).toHaveLength(1);
    }
  });

  it('two events at once on (name, key) with one waiting job: one taken, one kept', async () => {
    for (let i = 0; i < 10; i++) {
      const name = `ev-${randomUUID()}`;
      const job = await waiting({ event: name, key: 'k' });
      const answers = await Promise.all([1, 2].map((n) => sendEvent(db.sql, name, { key: 'k', payload: n, now: clock })));
      expect(answers.flatMap((a) => a.delivered)).toEqual([job.id]);
      expect(await pending(name)).toBe(1);
    }
  });

  /** Until a session of this database waits on a lock (the second statement, on the first's). */
  async function blockedOnALock(): Promise<void> {
    for (let i = 0; i < 500; i++) {
      const [row] = await db.sql`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`;
      if (row!.n > 0) return;
      await new Promise((r) => setImmediate(r));
    }
    throw new Error('the second statement never blocked: nothing orders it after the first');
  }

  /** A job claimed and running its start step (so the test can settle its wait itself). */
  async function running(name: string): Promise<Job> {
    await drain();
    await enqueue(db.sql, { type: 'signal_waiter', payload: { event: name } }, { now: clock });
    const claimed = await claimJobs(db.sql, { workerId: 'race', limit: 1, types: ['signal_waiter'], now: clock });
    return claimed[0]!;
  }

  it('an event racing the wait settle is taken exactly once, in either order', async () => {
    for (const first of ['event', 'wait'] as const) {
      const name = `ev-${randomUUID()}`;
      const job = await running(name);
      // the first holds its transaction open: the second must block on the (name, key) lock,
      // then see what the first wrote
      let second: Promise<unknown> | undefined;
      const wait = () => settleWaitRow(db.sql, job, waitFor(name, { step: 'resumed' }), clock);
      const event = () => sendEvent(db.sql, name, { payload: first, now: clock });
      const opened = db.sql.begin(async (tx) => {
        if (first === 'event') await tx`select worker.signal(${name}, null, ${tx.json(first)}::jsonb, null, ${clock}::timestamptz)`;
        else await settleWaitRow(tx, job, waitFor(name, { step: 'resumed' }), clock);
        second = first === 'event' ? wait() : event();
        await blockedOnALock();
      });
      await opened;
      await second;
      const { job: after, events } = (await getJob(db.sql, job.id))!;
      expect(after.runAt.getTime()).toBe(clock.getTime()); // due: the event was not lost
      expect(after.checkpoint.$event).toMatchObject({ outcome: 'signalled', payload: first });
      expect(events.filter((e) => e.kind === 'signalled')).toHaveLength(1);
      expect(await pending(name)).toBe(0);
      expect(await jobWait(db.sql, job.id)).toBeNull();
    }
  });

  it('events and wait settles at once, many rounds: every event is taken once or kept, none lost', async () => {
    for (let i = 0; i < 20; i++) {
      const name = `ev-${randomUUID()}`;
      const job = await running(name);
      const [settled, answer] = await Promise.all([
        settleWaitRow(db.sql, job, waitFor(name, { step: 'resumed' }), clock),
        sendEvent(db.sql, name, { payload: i, now: clock }),
      ]);
      expect(settled === 'signalled' || answer.delivered.length === 1).toBe(true);
      expect(await pending(name)).toBe(0);
      expect((await getJob(db.sql, job.id))!.job.runAt.getTime()).toBe(clock.getTime());
    }
  });
});
