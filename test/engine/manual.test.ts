import { z } from 'zod';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  cancelJob, claimJobs, ConflictError, defineJobType, enqueue, failJobPermanently, getJob, JobRegistry, next, NotFoundError,
  releaseJobLease, requeueJob, rescheduleJob, resumeJob, runSteps, sampleJobTypes, setJobPriority, ValidationError,
} from '../../queue/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { sampleRunner } from '../support/registry.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});

describe('cancel', () => {
  it('cancels a job that never started at once, without a hook', async () => {
    const { job } = await enqueue(db.sql, { type: 'uppercase', payload: { text: 'x' }, delayMs: 60_000 });
    const cancelled = await cancelJob(db.sql, job.id, 'not needed');
    expect(cancelled).toMatchObject({ status: 'cancelled', lastError: 'not needed' });
    expect((await getJob(db.sql, job.id))!.events.at(-1)).toMatchObject({ kind: 'cancelled', detail: { hookRan: false } });
    await expect(cancelJob(db.sql, job.id)).rejects.toBeInstanceOf(ConflictError);
  });

  it('cancels a running job at its step boundary, running the cancel hook', async () => {
    const hookCalls: Array<{ id: string; checkpoint: unknown }> = [];
    let cancelDuringStep: (() => Promise<unknown>) | undefined;
    const remote = defineJobType({
      type: 'countdown',
      payload: z.object({ n: z.number() }),
      async run({ job }) {
        await cancelDuringStep?.();
        return next('poll', { checkpoint: { remoteId: `remote-${job.id.slice(0, 4)}` }, delayMs: 60_000 });
      },
      async onCancel({ job, checkpoint }) {
        hookCalls.push({ id: job.id, checkpoint });
      },
    });
    const registry = new JobRegistry([remote, ...sampleJobTypes.filter((t) => t.type !== 'countdown')]);
    const { job } = await enqueue(db.sql, { type: 'countdown', payload: { n: 1 }, priority: 1 });
    cancelDuringStep = () => cancelJob(db.sql, job.id, 'user pressed cancel');
    const first = await runSteps({ sql: db.sql, registry, workerId: 'w' }, { maxJobs: 1 });
    expect(first.continued).toBe(1);
    // the pending cancel made the job due at once instead of in a minute
    cancelDuringStep = undefined;
    const second = await runSteps({ sql: db.sql, registry, workerId: 'w' }, { maxJobs: 1 });
    expect(second.cancelled).toBe(1);
    expect(hookCalls).toEqual([{ id: job.id, checkpoint: { remoteId: `remote-${job.id.slice(0, 4)}` } }]);
    const after = await getJob(db.sql, job.id);
    expect(after!.job).toMatchObject({ status: 'cancelled', lastError: 'user pressed cancel' });
    expect(after!.events.map((e) => e.kind)).toEqual(['enqueued', 'claimed', 'cancel_requested', 'checkpoint', 'claimed', 'cancelled']);
  });
});

describe('manual operations', () => {
  it('requeues a failed job with fresh attempts; refuses a done one', async () => {
    const { job } = await enqueue(db.sql, { type: 'fail', payload: {}, maxAttempts: 1, priority: 2 });
    await runSteps(sampleRunner(db.sql), { maxJobs: 1 });
    expect((await getJob(db.sql, job.id))!.job.status).toBe('failed');
    const requeued = await requeueJob(db.sql, job.id);
    expect(requeued).toMatchObject({ status: 'queued', attempts: 0, finishedAt: null, lastError: null });
    const ok = await enqueue(db.sql, { type: 'uppercase', payload: { text: 'y' }, priority: 1 });
    await runSteps(sampleRunner(db.sql), { maxJobs: 1 });
    await expect(requeueJob(db.sql, ok.job.id)).rejects.toThrow(/it is done/);
    await failJobPermanently(db.sql, job.id, 'operator gave up');
  });

  it('fails a queued or running job permanently with a reason; the owner then cannot settle', async () => {
    const { job } = await enqueue(db.sql, { type: 'uppercase', payload: { text: 'z' }, priority: 1 });
    const [claimed] = await claimJobs(db.sql, { workerId: 'w', limit: 1 });
    expect(claimed!.id).toBe(job.id);
    await expect(failJobPermanently(db.sql, job.id, '  ')).rejects.toBeInstanceOf(ValidationError);
    const failed = await failJobPermanently(db.sql, job.id, 'bad deploy');
    expect(failed).toMatchObject({ status: 'failed', lastError: 'bad deploy' });
    const { completeJob } = await import('../../queue/index.ts');
    expect(await completeJob(db.sql, claimed!, null)).toBe(false);
  });

  it('reschedules, resumes a parked job, changes priority, releases a lease', async () => {
    const { job } = await enqueue(db.sql, { type: 'uppercase', payload: { text: 'r' }, delayMs: 3_600_000 });
    const when = new Date('2030-01-01T00:00:00Z');
    expect((await rescheduleJob(db.sql, job.id, when)).runAt.toISOString()).toBe(when.toISOString());
    expect((await setJobPriority(db.sql, job.id, 10)).priority).toBe(10);
    await expect(setJobPriority(db.sql, job.id, 10.5)).rejects.toBeInstanceOf(ValidationError);
    await expect(resumeJob(db.sql, job.id, 'awaiting_bootstrap')).rejects.toThrow(/at step start, not awaiting_bootstrap/);
    const resumed = await resumeJob(db.sql, job.id);
    expect(resumed.runAt.getTime()).toBeLessThanOrEqual(Date.now() + 1000);

    const [claimed] = await claimJobs(db.sql, { workerId: 'holder', limit: 1 });
    expect(claimed!.id).toBe(job.id);
    const released = await releaseJobLease(db.sql, job.id);
    expect(released).toMatchObject({ status: 'queued', lockedUntil: null });
    const [reclaimed] = await claimJobs(db.sql, { workerId: 'next', limit: 1 });
    expect(reclaimed).toMatchObject({ id: job.id, lockedBy: 'next' });
  });

  it('answers unknown ids with NotFoundError', async () => {
    await expect(cancelJob(db.sql, '00000000-0000-4000-8000-000000000000')).rejects.toBeInstanceOf(NotFoundError);
    await expect(cancelJob(db.sql, 'not-a-uuid')).rejects.toBeInstanceOf(NotFoundError);
  });
});

describe('from SQL: the manual operations are functions an operator runs at a SQL prompt', () => {
  /** The SQLSTATE a statement is refused with, and the job and its history unchanged by it. */
  async function refused(id: string, statement: () => Promise<unknown>): Promise<string> {
    const before = await db.sql`select j.*, (select count(*) from worker.job_history h where h.job_id = j.id) as events from worker.jobs j where j.id = ${id}`;
    const error = await statement().then(() => null, (e: { code?: string }) => e);
    expect(error, 'refused').not.toBeNull();
    const after = await db.sql`select j.*, (select count(*) from worker.job_history h where h.job_id = j.id) as events from worker.jobs j where j.id = ${id}`;
    expect(after).toEqual(before);
    return error!.code!;
  }

  it('each does what its TypeScript twin does, with the same event, and refuses with SB404, SB409 or SB400 writing nothing', async () => {
    const { job } = await enqueue(db.sql, { type: 'uppercase', payload: { text: 's' }, priority: 0, delayMs: 3_600_000 });
    const at = new Date('2031-05-01T10:00:00Z');
    const [moved] = await db.sql`select * from worker.reschedule_job(${job.id}, ${at})`;
    expect(moved!.run_at).toEqual(at);
    const [prioritized] = await db.sql`select priority from worker.set_job_priority(${job.id}, 5)`;
    expect(prioritized!.priority).toBe(5);
    expect(await refused(job.id, () => db.sql`select * from worker.set_job_priority(${job.id}, 1001)`)).toBe('SB400');
    expect(await refused(job.id, () => db.sql`select * from worker.requeue_job(${job.id})`)).toBe('SB409');
    expect(await refused(job.id, () => db.sql`select * from worker.release_job_lease(${job.id})`)).toBe('SB409');
    expect(await refused(job.id, () => db.sql`select * from worker.fail_job(${job.id}, ${' \t\n'})`)).toBe('SB400');
    expect(await refused(job.id, () => db.sql`select * from worker.resume_job(${job.id}, 'awaiting_bootstrap')`)).toBe('SB409');
    await db.sql`select * from worker.resume_job(${job.id})`;

    const [claimed] = await claimJobs(db.sql, { workerId: 'sql-holder', limit: 1, types: ['uppercase'] });
    expect(claimed!.id).toBe(job.id);
    const [released] = await db.sql`select status, lease_token, locked_by from worker.release_job_lease(${job.id})`;
    expect(released).toMatchObject({ status: 'queued', lease_token: null });
    const [failed] = await db.sql`select status, last_error from worker.fail_job(${job.id}, 'manually failed')`;
    expect(failed).toEqual({ status: 'failed', last_error: 'manually failed' });
    const [requeued] = await db.sql`select status, attempts, last_error from worker.requeue_job(${job.id})`;
    expect(requeued).toEqual({ status: 'queued', attempts: 0, last_error: null });
    const [cancelled] = await db.sql`select status, last_error from worker.cancel_job(${job.id}, 'not needed')`;
    expect(cancelled).toMatchObject({ status: 'queued' }); // started: a request, for the hook at its next step
    // a second request is no error and changes nothing: no second event, the first reason kept
    const [again] = await db.sql`select cancel_reason from worker.cancel_job(${job.id}, 'again')`;
    expect(again!.cancel_reason).toBe('not needed');

    const events = (await getJob(db.sql, job.id))!.events.map((e) => [e.kind, e.detail]);
    expect(events.slice(1)).toEqual([
      ['rescheduled', { from: expect.any(String), to: '2031-05-01T10:00:00.000Z' }],
      ['priority_changed', { from: 0, to: 5 }],
      ['resumed', { step: 'start' }],
      ['claimed', expect.anything()],
      ['lease_released', { owner: 'sql-holder', manual: true }],
      ['failed', { reason: 'manually failed', manual: true }],
      ['requeued', { from: 'failed' }],
      ['cancel_requested', { reason: 'not needed' }],
    ]);
    const missing = '00000000-0000-4000-8000-000000000000';
    await expect(db.sql`select * from worker.fail_job(${missing}, 'x')`).rejects.toMatchObject({ code: 'SB404', message: `no job ${missing}` });
  });

  it('two operators on one job at once: the row lock orders them, the second sees the first one\'s result', async () => {
    for (let round = 0; round < 5; round++) {
      const { job } = await enqueue(db.sql, { type: 'uppercase', payload: { text: `race ${round}` }, delayMs: 3_600_000 });
      const answers = await Promise.allSettled([
        db.sql`select status from worker.fail_job(${job.id}, 'first')`,
        db.sql`select status from worker.fail_job(${job.id}, 'second')`,
        failJobPermanently(db.sql, job.id, 'third'),
      ]);
      expect(answers.filter((a) => a.status === 'fulfilled')).toHaveLength(1);
      for (const a of answers.filter((x) => x.status === 'rejected')) expect(String((a as PromiseRejectedResult).reason.message)).toMatch(/cannot fail job .*: it is failed/);
      const failedEvents = (await getJob(db.sql, job.id))!.events.filter((e) => e.kind === 'failed');
      expect(failedEvents).toHaveLength(1);
    }
  });
});
