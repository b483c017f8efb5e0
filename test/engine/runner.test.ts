import { beforeAll, describe, expect, it } from 'vitest';
import { enqueue, enqueueBatch, getJob, JobRegistry, runSteps, sampleJobTypes } from '../../queue/index.ts';
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

  it('fails a job whose type has no handler in this runner, clearly', async () => {
    const { job } = await enqueue(db.sql, { type: 'fail', payload: {} });
    await runSteps({ sql: db.sql, registry: new JobRegistry(sampleJobTypes.filter((t) => t.type !== 'fail')), workerId: 'r' });
    const after = await getJob(db.sql, job.id);
    expect(after!.job.status).toBe('failed');
    expect(after!.job.lastError).toMatch(/unknown job type "fail"/);
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
