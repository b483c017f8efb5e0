import { beforeAll, describe, expect, it } from 'vitest';
import { alertStuckJobs, claimJobs, completeJob, enqueue, heartbeat, pruneFinished } from '../../queue/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});

const T0 = new Date('2026-11-01T00:00:00Z');
const DAY = 86_400_000;
const at = (ms: number) => new Date(T0.getTime() + ms);

describe('maintenance', () => {
  it('prunes finished jobs and events past retention, keeping failed ones longer and live ones always', async () => {
    const done = await enqueue(db.sql, { type: 'uppercase', payload: { text: 'old' }, priority: 1 }, { now: at(0) });
    const [c] = await claimJobs(db.sql, { workerId: 'w', limit: 1, now: at(0) });
    await completeJob(db.sql, c!, null, { now: at(1000) });
    const failed = await enqueue(db.sql, { type: 'uppercase', payload: { text: 'f' }, priority: 1 }, { now: at(0) });
    await db.sql`update worker.jobs set status = 'failed', finished_at = ${at(1000)} where id = ${failed.job.id}`;
    const live = await enqueue(db.sql, { type: 'uppercase', payload: { text: 'live' }, runAt: at(60 * DAY) }, { now: at(0) });

    expect(await pruneFinished(db.sql, { now: at(6 * DAY), eventRetentionMs: 60 * DAY })).toMatchObject({ jobs: 0, events: 0 });
    expect(await pruneFinished(db.sql, { now: at(8 * DAY), eventRetentionMs: 60 * DAY })).toMatchObject({ jobs: 1, events: 0 });
    const ids = async () => (await db.sql`select id from worker.jobs`).map((r) => r.id);
    expect(await ids()).not.toContain(done.job.id);
    expect(await ids()).toContain(failed.job.id);
    expect((await pruneFinished(db.sql, { now: at(31 * DAY) })).jobs).toBe(1);
    expect(await ids()).toEqual([live.job.id]);
    const [ev] = await db.sql`select count(*)::int as n from worker.job_history`;
    expect(ev!.n).toBe(0); // every event here is older than 30 days at T0 + 31 d
  });

  it('prunes events oldest first in bounded batches, past a younger event stamped out of order', async () => {
    const events = async () => (await db.sql`select job_id, at from worker.job_history order by id`).map((r) => ({ job: r.job_id as string, at: (r.at as Date).getTime() }));
    const old = [];
    for (let i = 0; i < 5; i++) old.push((await enqueue(db.sql, { type: 'uppercase', payload: { text: `e${i}` }, runAt: at(90 * DAY) }, { now: at(0) })).job.id);
    // stamped in the future, between the old ones by id
    const young = (await enqueue(db.sql, { type: 'uppercase', payload: { text: 'young' }, runAt: at(90 * DAY) }, { now: at(40 * DAY) })).job.id;
    for (let i = 5; i < 8; i++) old.push((await enqueue(db.sql, { type: 'uppercase', payload: { text: `e${i}` }, runAt: at(90 * DAY) }, { now: at(0) })).job.id);
    const before = (await events()).length;
    const first = await pruneFinished(db.sql, { now: at(31 * DAY), limit: 3 });
    expect(first.events).toBe(3);
    expect((await events()).map((e) => e.job)).not.toContain(old[0]);
    let total = first.events;
    for (let i = 0; i < 5; i++) total += (await pruneFinished(db.sql, { now: at(31 * DAY), limit: 3 })).events;
    expect(total).toBe(8);
    const left = await events();
    expect(left).toHaveLength(before - 8);
    expect(left.filter((e) => e.job === young)).toHaveLength(1);
    expect(left.every((e) => e.at >= at(31 * DAY - 30 * DAY).getTime())).toBe(true);
  });

  it('opens one stuck_job alert for a step running past the threshold, and resolves it when the job moves on', async () => {
    const { job } = await enqueue(db.sql, { type: 'uppercase', payload: { text: 'stuck' }, priority: 1 }, { now: at(0) });
    const [c] = await claimJobs(db.sql, { workerId: 'slowpoke', limit: 1, now: at(0) });
    const hour = 3_600_000;
    await heartbeat(db.sql, c!, { now: at(2 * hour) }); // kept alive by heartbeats: not rescued, but stuck
    expect(await alertStuckJobs(db.sql, { now: at(hour) })).toEqual({ opened: 0, resolved: 0 });
    expect(await alertStuckJobs(db.sql, { now: at(2 * hour + 1) })).toEqual({ opened: 1, resolved: 0 });
    expect(await alertStuckJobs(db.sql, { now: at(2 * hour + 60_000) })).toEqual({ opened: 0, resolved: 0 });
    const [open] = await db.sql`select occurrences, message from worker.alerts where job_id = ${job.id} and resolved_at is null`;
    expect(open!.occurrences).toBe(2);
    expect(open!.message).toContain('slowpoke');
    await completeJob(db.sql, c!, null, { now: at(2 * hour + 120_000) });
    expect(await alertStuckJobs(db.sql, { now: at(2 * hour + 180_000) })).toEqual({ opened: 0, resolved: 1 });
  });
});
