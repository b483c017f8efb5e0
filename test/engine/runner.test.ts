import { beforeAll, describe, expect, it } from 'vitest';
import { claimJobs, enqueue, enqueueBatch, getJob, JobRegistry, runStep, runSteps, sampleJobTypes } from '../../queue/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { sampleRunner } from '../support/registry.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});

describe('runner', () => {
  it('runs a job to done with its result and a full event history', async () => {
    const { job } = await enqueue(db.sql, { type: 'uppercase', payload: { text: 'hi' } });
    expect(job.status).toBe('queued');
    const counts = await runSteps(sampleRunner(db.sql));
    expect(counts).toMatchObject({ claimed: 1, done: 1 });
    const after = await getJob(db.sql, job.id);
    expect(after!.job).toMatchObject({ status: 'done', result: { text: 'HI' }, attempts: 1 });
    expect(after!.job.finishedAt).toBeInstanceOf(Date);
    expect(after!.events.map((e) => e.kind)).toEqual(['enqueued', 'claimed', 'done']);
  });

  it('advances a multi-step job one checkpointed step per claim without using up attempts', async () => {
    const { job } = await enqueue(db.sql, { type: 'countdown', payload: { n: 4 }, maxAttempts: 1 });
    const counts = await runSteps(sampleRunner(db.sql));
    expect(counts).toMatchObject({ claimed: 5, continued: 4, done: 1 });
    const after = await getJob(db.sql, job.id);
    expect(after!.job).toMatchObject({ status: 'done', result: { steps: 4 }, step: 'count', checkpoint: { taken: 4 } });
    expect(after!.events.filter((e) => e.kind === 'checkpoint')).toHaveLength(4);
  });

  it('stops at maxJobs and leaves the rest queued', async () => {
    await enqueueBatch(db.sql, Array.from({ length: 10 }, (_, i) => ({ type: 'uppercase', payload: { text: `m${i}` }, priority: 900 })));
    const counts = await runSteps(sampleRunner(db.sql, { concurrency: 3 }), { maxJobs: 4 });
    expect(counts.claimed).toBe(4);
    const [row] = await db.sql`select count(*)::int as n from worker.jobs where priority = 900 and status = 'queued'`;
    expect(row!.n).toBe(6);
    await runSteps(sampleRunner(db.sql));
  });

  it('claims only the types its registry can run: a job of another type stays queued, attempt unspent, no alert', async () => {
    // what `npm run worker -- --drain` met in the `npm start` database: due jobs of types another runner serves
    const { job: orphan } = await enqueue(db.sql, { type: 'fail', payload: {}, priority: 0 });
    const known = await enqueueBatch(db.sql, Array.from({ length: 3 }, (_, i) => ({ type: 'uppercase', payload: { text: `k${i}` } })));
    const registry = new JobRegistry(sampleJobTypes.filter((t) => t.type !== 'fail'));
    const counts = await runSteps({ sql: db.sql, registry, workerId: 'no-fail-handler' });
    expect(counts).toMatchObject({ claimed: 3, done: 3, failed: 0, released: 0 });
    for (const { job } of known) expect((await getJob(db.sql, job.id))!.job.status).toBe('done');
    const after = (await getJob(db.sql, orphan.id))!;
    expect(after.job).toMatchObject({ status: 'queued', attempts: 0, lockedBy: null, lastError: null });
    expect(after.events.map((e) => e.kind)).toEqual(['enqueued']);
    const alerts = await db.sql`select kind from worker.alerts where job_id = ${orphan.id}`;
    expect(alerts).toHaveLength(0);
    // a runner that has the type runs it
    expect(await runSteps(sampleRunner(db.sql))).toMatchObject({ claimed: 1, retried: 1 });
    await db.sql`update worker.jobs set status = 'cancelled', finished_at = now() where id = ${orphan.id}`;
  });

  it('hands back, attempt unspent, a claimed job whose type its registry lacks (never fails it)', async () => {
    const { job } = await enqueue(db.sql, { type: 'fail', payload: {}, priority: 0 });
    // claimed by a claim without the type filter, then given to a runner without the handler
    const [claimed] = await claimJobs(db.sql, { workerId: 'r', limit: 1 });
    expect(claimed!.id).toBe(job.id);
    const registry = new JobRegistry(sampleJobTypes.filter((t) => t.type !== 'fail'));
    const outcome = await runStep({ sql: db.sql, registry, workerId: 'r' }, claimed!, new AbortController().signal);
    expect(outcome).toBe('released');
    const after = (await getJob(db.sql, job.id))!;
    expect(after.job).toMatchObject({ status: 'queued', attempts: 0, lockedUntil: null });
    expect(after.events.map((e) => e.kind)).toEqual(['enqueued', 'claimed', 'lease_released']);
    expect(after.events.at(-1)!.detail).toMatchObject({ reason: expect.stringMatching(/no handler for job type "fail"/) });
    expect(await db.sql`select kind from worker.alerts where job_id = ${job.id}`).toHaveLength(0);
    await db.sql`update worker.jobs set status = 'cancelled', finished_at = now() where id = ${job.id}`;
  });

  it('fails at once a job whose payload does not match its type, naming the field', async () => {
    const { job } = await enqueue(db.sql, { type: 'uppercase', payload: { text: 42 } });
    await runSteps(sampleRunner(db.sql));
    const after = await getJob(db.sql, job.id);
    expect(after!.job.status).toBe('failed');
    expect(after!.job.attempts).toBe(1);
    expect(after!.job.lastError).toMatch(/invalid payload: text/);
  });
});
