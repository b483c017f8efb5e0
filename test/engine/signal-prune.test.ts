// Postgres matrix: signals and their pruning.
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  claimJobs, defineJobType, done, enqueue, failJobPermanently, getJob, JobRegistry, jobWait, pruneFinished, runSteps, sendEvent, signalJob,
  waitFor, type Job, type Runner,
} from '../../queue/index.ts';
import { settleWaitRow } from '../../queue/driver/signals.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';

// Retention of the signals' rows (worker.prune_signals, 0240): waits and kept events of jobs that
// ended or are gone, kept events past their retention, empty channels; and the races of a prune
// with a signal and with a wait settle on the same channel.

let db: TestDatabase;
const waiter = defineJobType({
  type: 'prune_waiter',
  payload: z.object({ event: z.string() }),
  async run(ctx) {
    if (ctx.step === 'start') return waitFor(ctx.payload.event, { step: 'resumed' });
    return done({ saw: ctx.event?.outcome ?? null });
  },
});
const registry = new JobRegistry([waiter]);
const T0 = new Date('2031-05-01T10:00:00Z');
const DAY = 86_400_000;
const at = (ms: number) => new Date(T0.getTime() + ms);
const runner = (): Runner => ({ sql: db.sql, registry, workerId: 'prune-test', concurrency: 5, clock: () => T0 });

beforeAll(async () => {
  db = await createTestDatabase();
  await registry.sync(db.sql);
});

/** A job parked in its wait for `name`. */
async function waiting(name: string): Promise<Job> {
  const { job } = await enqueue(db.sql, { type: 'prune_waiter', payload: { event: name } }, { now: T0 });
  const [claimed] = await claimJobs(db.sql, { workerId: 'w', limit: 1, types: ['prune_waiter'], now: T0 });
  expect(claimed!.id).toBe(job.id);
  await settleWaitRow(db.sql, claimed!, waitFor(name, { step: 'resumed' }), T0);
  return job;
}

/** A job claimed at its start step: not waiting, so an event sent to it is kept. */
async function running(name: string): Promise<Job> {
  await enqueue(db.sql, { type: 'prune_waiter', payload: { event: name } }, { now: T0 });
  return (await claimJobs(db.sql, { workerId: 'w', limit: 1, types: ['prune_waiter'], now: T0 }))[0]!;
}

const count = async (table: 'job_waits' | 'signal_events' | 'signal_channels', name: string) =>
  (await db.sql`select count(*)::int as n from ${db.sql(`worker.${table}`)} where name = ${name}`)[0]!.n as number;
const prune = (now: Date, keptSignalRetentionMs = 7 * DAY, limit?: number) =>
  pruneFinished(db.sql, { now, keptSignalRetentionMs, finishedRetentionMs: 365 * DAY, failedRetentionMs: 365 * DAY, limit });

describe('pruning the signals rows', () => {
  it('deletes the wait and the kept events of a job that ended, and of one that is gone; a live wait stays', async () => {
    const name = `p-${randomUUID()}`;
    const live = await waiting(name);
    const ended = await waiting(`${name}-ended`);
    const gone = await waiting(`${name}-gone`);
    const kept = await running(`${name}-kept`);
    await signalJob(db.sql, kept.id, `${name}-kept`, { payload: 1, now: T0 }); // kept: the job is not waiting
    await failJobPermanently(db.sql, ended.id, 'given up');
    await failJobPermanently(db.sql, kept.id, 'given up');
    await failJobPermanently(db.sql, gone.id, 'given up');
    await db.sql`delete from worker.jobs where id = ${gone.id}`;

    const counts = await prune(at(1000));
    expect(counts.signalWaits).toBeGreaterThanOrEqual(2);
    expect(counts.signalEvents).toBeGreaterThanOrEqual(1);
    expect(await jobWait(db.sql, ended.id)).toBeNull();
    expect(await jobWait(db.sql, gone.id)).toBeNull();
    expect(await count('signal_events', `${name}-kept`)).toBe(0);
    expect(await jobWait(db.sql, live.id)).not.toBeNull();
    // the live wait's channel stays; the ended waits' channels had nothing left on them
    expect(await count('signal_channels', name)).toBe(1);
    expect(await count('signal_channels', `${name}-ended`)).toBe(0);
    expect(await count('signal_channels', `${name}-gone`)).toBe(0);
    // and the live wait still takes its event
    expect((await sendEvent(db.sql, name, { payload: 'go', now: T0 })).delivered).toEqual([live.id]);
  });

  it('drops a kept event past its retention, counted, and keeps a younger one for the next wait', async () => {
    const name = `p-${randomUUID()}`;
    await sendEvent(db.sql, name, { payload: 'old', now: T0 });
    await sendEvent(db.sql, name, { payload: 'young', now: at(5 * DAY) });
    const job = await running(`${name}-job`);
    await signalJob(db.sql, job.id, `${name}-job`, { payload: 'old', now: T0 });

    const before = await prune(at(7 * DAY - 1));
    expect(before.signalEventsExpired).toBe(0);
    const counts = await prune(at(7 * DAY + 1));
    expect(counts.signalEventsExpired).toBe(2); // the channel's old event and the job's
    expect(await count('signal_events', name)).toBe(1);
    expect(await count('signal_events', `${name}-job`)).toBe(0);
    expect(await count('signal_channels', name)).toBe(1); // an event is still on it

    // the next wait on the channel takes the young one
    const next = await running(name);
    expect(await settleWaitRow(db.sql, next, waitFor(name, { step: 'resumed' }), T0)).toBe('signalled');
    expect((await getJob(db.sql, next.id))!.job.checkpoint.$event).toMatchObject({ payload: 'young' });
    await runSteps(runner(), { maxJobs: 10 });
  });

  it('works through a backlog in bounded passes', async () => {
    const name = `p-${randomUUID()}`;
    for (let i = 0; i < 5; i++) await sendEvent(db.sql, `${name}-${i}`, { payload: i, now: T0 });
    let expired = 0;
    let channels = 0;
    for (let pass = 0; pass < 6; pass++) {
      const c = await prune(at(8 * DAY), 7 * DAY, 2);
      expect(c.signalEventsExpired).toBeLessThanOrEqual(2);
      expect(c.signalChannels).toBeLessThanOrEqual(2);
      expired += c.signalEventsExpired;
      channels += c.signalChannels;
    }
    expect(expired).toBeGreaterThanOrEqual(5);
    for (let i = 0; i < 5; i++) expect(await count('signal_channels', `${name}-${i}`)).toBe(0);
    expect(channels).toBeGreaterThanOrEqual(5);
  });

  it('a prune racing a wait settle on the channel leaves it the kept event: the prune skips what the settle holds', async () => {
    const name = `p-${randomUUID()}`;
    await sendEvent(db.sql, name, { payload: 'old', now: T0 });
    const job = await running(name);
    const other = db.client(2);
    let pruned: Awaited<ReturnType<typeof prune>> | undefined;
    await db.sql.begin(async (tx) => {
      // the settle takes the channel's lock and the event, and has not committed
      expect(await settleWaitRow(tx, job, waitFor(name, { step: 'resumed' }), T0)).toBe('signalled');
      // the prune does not wait for it (SKIP LOCKED) and deletes nothing of the channel
      pruned = await pruneFinished(other, { now: at(30 * DAY), keptSignalRetentionMs: 7 * DAY, finishedRetentionMs: 365 * DAY, failedRetentionMs: 365 * DAY });
    });
    expect(pruned!.signalEventsExpired).toBe(0);
    const { job: after, events } = (await getJob(db.sql, job.id))!;
    expect(after.checkpoint.$event).toMatchObject({ outcome: 'signalled', payload: 'old' });
    expect(events.filter((e) => e.kind === 'signalled')).toHaveLength(1);
    expect(await count('signal_channels', name)).toBe(1);
  });

  it('a prune holding an old event\'s channel makes a concurrent wait settle wait, then see the event gone', async () => {
    const name = `p-${randomUUID()}`;
    await sendEvent(db.sql, name, { payload: 'old', now: T0 });
    const job = await running(name);
    const other = db.client(2);
    let settled: Promise<unknown> | undefined;
    await db.sql.begin(async (tx) => {
      const [row] = await tx`select * from worker.prune_signals(${at(DAY)}::timestamptz, 100)`;
      expect(row!.expired).toBe(1);
      settled = settleWaitRow(other, job, waitFor(name, { step: 'resumed' }), T0);
      await blockedOnALock();
    });
    // the settle ran after the prune: no event for it, it waits (nothing half-taken)
    expect(await settled).toBe('waiting');
    expect(await jobWait(db.sql, job.id)).not.toBeNull();
    expect(await count('signal_channels', name)).toBe(1);
  });

  it('a channel the prune deletes while a signal is between its insert and its lock is made again, and the event kept', async () => {
    const name = `p-${randomUUID()}`;
    // an empty channel, as a wait that took its event leaves it
    await db.sql`insert into worker.signal_channels (name, key) values (${name}, '')`;
    const other = db.client(2);
    let signalled: Promise<Awaited<ReturnType<typeof sendEvent>>> | undefined;
    await db.sql.begin(async (tx) => {
      // what the prune does to an empty channel: lock it, then delete it
      await tx`select 1 from worker.signal_channels where name = ${name} and key = '' for update`;
      signalled = sendEvent(other, name, { payload: 'second', now: at(8 * DAY) }); // its insert finds the row; its lock waits
      await blockedOnALock();
      await tx`delete from worker.signal_channels where name = ${name} and key = ''`;
    });
    const answer = await signalled!;
    expect(answer.keptEventId).not.toBeNull();
    expect(await count('signal_channels', name)).toBe(1); // made again, and locked by the signal
    const job = await running(name);
    expect(await settleWaitRow(db.sql, job, waitFor(name, { step: 'resumed' }), T0)).toBe('signalled');
    expect((await getJob(db.sql, job.id))!.job.checkpoint.$event).toMatchObject({ payload: 'second' });
  });

  it('a prune and signals on the same channels at once, many rounds: no event delivered twice or lost while young', async () => {
    const names = Array.from({ length: 4 }, () => `p-${randomUUID()}`);
    const other = db.client(4);
    for (let round = 0; round < 10; round++) {
      const answers = await Promise.all([
        ...names.map((n) => sendEvent(other, n, { payload: round, now: at(round) })),
        prune(at(round), 7 * DAY),
      ]);
      for (const a of answers.slice(0, names.length)) expect((a as { keptEventId: unknown }).keptEventId).not.toBeNull();
    }
    for (const n of names) {
      expect(await count('signal_events', n)).toBe(10);
      expect(await count('signal_channels', n)).toBe(1);
    }
  });
});

async function blockedOnALock(): Promise<void> {
  for (let i = 0; i < 500; i++) {
    const [row] = await db.sql`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`;
    if (row!.n > 0) return;
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error('the second statement never blocked: nothing orders it after the first');
}
