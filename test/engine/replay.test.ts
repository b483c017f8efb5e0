import { beforeAll, describe, expect, it } from 'vitest';
import { ConflictError, enqueue, getJob, JobRegistry, replayJob, runSteps, sampleJobTypes, ValidationError } from '../../queue/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { sampleRunner } from '../support/registry.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
  // the types' payload schemas, which a replay's edited payload is checked against
  await new JobRegistry(sampleJobTypes).sync(db.sql);
});

/** A countdown of n steps run to its end (done). */
async function finishedCountdown(n: number) {
  const { job } = await enqueue(db.sql, { type: 'countdown', payload: { n }, priority: 1 });
  for (let i = 0; i <= n && (await getJob(db.sql, job.id))!.job.status !== 'done'; i++) await runSteps(sampleRunner(db.sql), { maxJobs: 1 });
  return (await getJob(db.sql, job.id))!;
}

const jobCount = async () => (await db.sql<{ n: number }[]>`select count(*)::int as n from worker.jobs`)[0]!.n;
const rowOf = async (id: string) => (await db.sql`select * from worker.jobs where id = ${id}`)[0];

describe('replay', () => {
  it('runs a done job again as a new job from its first step, linked both ways, the old row untouched', async () => {
    const old = await finishedCountdown(2);
    expect(old.job.status).toBe('done');
    const before = await rowOf(old.job.id);
    const replay = await replayJob(db.sql, old.job.id);
    expect(replay.id).not.toBe(old.job.id);
    expect(replay).toMatchObject({ type: 'countdown', status: 'queued', step: 'start', checkpoint: {}, payload: { n: 2 }, priority: 1, attempts: 0 });
    expect(await rowOf(old.job.id)).toEqual(before);
    const newEvents = (await getJob(db.sql, replay.id))!.events;
    expect(newEvents.map((e) => e.kind)).toEqual(['enqueued', 'replay_of']);
    expect(newEvents[1]!.detail).toEqual({ job: old.job.id, fromStep: 'start', payloadEdited: false });
    expect((await getJob(db.sql, old.job.id))!.events.at(-1)).toMatchObject({ kind: 'replayed_by', detail: { job: replay.id, fromStep: 'start' } });
    // and it runs to done on its own
    for (let i = 0; i < 4; i++) await runSteps(sampleRunner(db.sql), { maxJobs: 1 });
    expect((await getJob(db.sql, replay.id))!.job).toMatchObject({ status: 'done', result: { steps: 2 } });
  });

  it('replays from a named step with the old checkpoint, and an edited payload checked as an enqueue', async () => {
    const old = await finishedCountdown(3);
    const steps = old.events.filter((e) => e.kind === 'checkpoint').map((e) => e.detail.step as string);
    expect(steps.length).toBeGreaterThan(1);
    const from = steps[steps.length - 1]!;
    const replay = await replayJob(db.sql, old.job.id, { fromStep: from, payload: { n: 3 } });
    expect(replay).toMatchObject({ step: from, checkpoint: old.job.checkpoint, payload: { n: 3 } });
    expect((await getJob(db.sql, replay.id))!.events[1]!.detail).toMatchObject({ fromStep: from, payloadEdited: true });

    const jobsBefore = await jobCount();
    const badStep = await replayJob(db.sql, old.job.id, { fromStep: 'nope' }).catch((e: unknown) => e);
    expect(badStep).toBeInstanceOf(ValidationError);
    expect(badStep).toMatchObject({ field: 'fromStep', message: expect.stringContaining('start') });
    const badPayload = await replayJob(db.sql, old.job.id, { payload: { n: 'three' } as never }).catch((e: unknown) => e);
    expect(badPayload).toBeInstanceOf(ValidationError);
    expect((badPayload as ValidationError).field).toMatch(/^payload/);
    const jobsAfter = await jobCount();
    expect(jobsAfter).toBe(jobsBefore);
    expect((await getJob(db.sql, old.job.id))!.events.filter((e) => e.kind === 'replayed_by')).toHaveLength(1);
  });

  it('refuses a job that has not ended', async () => {
    const { job } = await enqueue(db.sql, { type: 'uppercase', payload: { text: 'x' }, delayMs: 60_000 });
    await expect(replayJob(db.sql, job.id)).rejects.toBeInstanceOf(ConflictError);
  });
});
