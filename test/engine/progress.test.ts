// Postgres matrix: parked rows (run_at 'infinity'), which 15 and 16 subtract differently.
import { z } from 'zod';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  cancelJob, defineJobType, done, enqueue, getJob, inProgressJobs, jobProgress, JobRegistry, listJobs, next, runSteps, type Job,
} from '../../queue/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';

/**
 * A job's progress as the API, the dashboard and the metrics show it: in progress from its first
 * claim to its end (running, or queued between steps), and `attempts` read as the failures of the
 * current step — 0 while the first try runs, 1 after a failed try (also while the retry runs), 0
 * again once a `continue` moves the job to its next step. Real runners, a pinned clock.
 */

const T0 = new Date('2032-05-01T09:00:00Z');
const SECOND = 1000;

let db: TestDatabase;
/** The release of the step now waiting in its run, set by that step. */
let release: (() => void) | undefined;

const probe = defineJobType({
  type: 'progress_probe',
  payload: z.object({ hold: z.boolean().default(true) }),
  maxAttempts: 3,
  retry: { baseMs: SECOND, maxMs: SECOND },
  async run({ step, attempt, payload }) {
    if (payload.hold) await new Promise<void>((r) => (release = r));
    if (step === 'start' && attempt === 1) throw new Error('first try fails');
    if (step === 'start') return next('second', { delayMs: 60 * SECOND });
    return done({ ok: true });
  },
  async onCancel() {},
});

const registry = new JobRegistry([probe]);

beforeAll(async () => {
  db = await createTestDatabase();
  await registry.sync(db.sql);
});

const jobOf = async (id: string): Promise<Job> => (await getJob(db.sql, id))!.job;

/** Runs one step at `at`; `during` sees the job while the step runs (held until it returns). */
async function runOneStep(id: string, at: Date, during?: (job: Job) => Promise<void>) {
  release = undefined;
  const run = runSteps({ sql: db.sql, registry, workerId: 'progress-test', clock: () => at }, { maxJobs: 1 });
  if (during) {
    await expect.poll(() => release, { timeout: 10_000 }).toBeDefined();
    await during(await jobOf(id));
  }
  await expect.poll(() => release, { timeout: 10_000 }).toBeDefined();
  release!();
  return run;
}

describe('a job in progress', () => {
  it('reads 0 failures on its first try, 1 after a failed try and through the retry, 0 after a continue; in progress until it ends', async () => {
    const { job } = await enqueue(db.sql, { type: 'progress_probe', payload: {}, runAt: T0 });
    expect(jobProgress(job)).toEqual({ inProgress: false, currentStep: null, nextStepAt: null, failures: 0 });

    await runOneStep(job.id, T0, async (running) => {
      expect(running).toMatchObject({ status: 'running', attempts: 1 });
      expect(jobProgress(running)).toEqual({ inProgress: true, currentStep: 'start', nextStepAt: null, failures: 0 });
    });
    const retrying = await jobOf(job.id);
    expect(retrying).toMatchObject({ status: 'queued', lastError: 'first try fails' });
    expect(jobProgress(retrying)).toEqual({ inProgress: true, currentStep: 'start', nextStepAt: retrying.runAt, failures: 1 });
    expect(retrying.runAt.getTime()).toBeGreaterThan(T0.getTime());

    const t1 = new Date(T0.getTime() + 2 * SECOND);
    expect(await runOneStep(job.id, t1, async (running) => {
      expect(running).toMatchObject({ status: 'running', attempts: 2 });
      expect(jobProgress(running)).toMatchObject({ inProgress: true, nextStepAt: null, failures: 1 });
    })).toMatchObject({ continued: 1 });
    const between = await jobOf(job.id);
    expect(between).toMatchObject({ status: 'queued', step: 'second' });
    expect(jobProgress(between)).toEqual({
      inProgress: true, currentStep: 'second', nextStepAt: new Date(t1.getTime() + 60 * SECOND), failures: 0,
    });

    const t2 = new Date(t1.getTime() + 61 * SECOND);
    await runOneStep(job.id, t2, async (running) => {
      expect(jobProgress(running)).toEqual({ inProgress: true, currentStep: 'second', nextStepAt: null, failures: 0 });
    });
    const finished = await jobOf(job.id);
    expect(finished).toMatchObject({ status: 'done', attempts: 1 });
    expect(jobProgress(finished)).toEqual({ inProgress: false, currentStep: null, nextStepAt: null, failures: 0 });
  });

  it('keeps max_attempts: a job of one try whose try fails ends failed, reading 1 failure of 1', async () => {
    const { job } = await enqueue(db.sql, { type: 'progress_probe', payload: { hold: false }, runAt: T0, maxAttempts: 1 });
    const counts = await runSteps({ sql: db.sql, registry, workerId: 'progress-test', clock: () => T0 }, { maxJobs: 1 });
    expect(counts).toMatchObject({ claimed: 1, failed: 1 });
    const failed = await jobOf(job.id);
    expect(failed).toMatchObject({ status: 'failed', attempts: 1, maxAttempts: 1 });
    expect(jobProgress(failed)).toMatchObject({ inProgress: false, failures: 1 });
  });

  it('a started job cancelled through its hook reads the failures before the cancel, not the try that ran the hook', async () => {
    const { job } = await enqueue(db.sql, { type: 'progress_probe', payload: {}, runAt: T0 });
    await runOneStep(job.id, T0); // fails: queued for its retry, 1 failure
    await cancelJob(db.sql, job.id, 'no longer wanted', { now: new Date(T0.getTime() + SECOND) });
    const counts = await runSteps({ sql: db.sql, registry, workerId: 'progress-test', clock: () => new Date(T0.getTime() + 2 * SECOND) }, { maxJobs: 1 });
    expect(counts).toMatchObject({ cancelled: 1 });
    const cancelled = await jobOf(job.id);
    expect(cancelled).toMatchObject({ status: 'cancelled', attempts: 2 });
    expect(jobProgress(cancelled)).toMatchObject({ inProgress: false, failures: 1 });
  });

  it('is listed with the inProgress filter and by inProgressJobs: running first, then waiting ones next due first, parked last', async () => {
    await db.sql`delete from worker.jobs`;
    const make = async (runAt: Date) => (await enqueue(db.sql, { type: 'progress_probe', payload: {}, runAt })).job.id;
    const [running, soon, later, parked, fresh, finished] = (await Promise.all([T0, T0, T0, T0, T0, T0].map(make))) as [string, string, string, string, string, string];
    const at = (s: number) => new Date(T0.getTime() + s * SECOND);
    await db.sql`update worker.jobs set status = 'running', attempts = 1, started_at = ${T0}, claimed_at = ${T0}, locked_by = 'host-1',
                   locked_until = ${at(600)}, lease_token = gen_random_uuid() where id = ${running}`;
    await db.sql`update worker.jobs set started_at = ${T0}, step = 'poll', run_at = ${at(30)} where id = ${soon}`;
    await db.sql`update worker.jobs set started_at = ${T0}, step = 'poll', run_at = ${at(90)}, locked_by = 'host-0' where id = ${later}`;
    await db.sql`update worker.jobs set started_at = ${T0}, step = 'child', run_at = 'infinity' where id = ${parked}`;
    await db.sql`update worker.jobs set status = 'done', attempts = 1, started_at = ${T0}, finished_at = ${T0} where id = ${finished}`;

    const shown = await inProgressJobs(db.sql, { now: at(10) });
    expect(shown.map((j) => j.id)).toEqual([running, soon, later, parked]);
    expect(shown[0]).toEqual({ id: running, type: 'progress_probe', status: 'running', step: 'start', owner: 'host-1', runningForMs: 10_000, nextStepAt: null, failures: 0, lastError: null });
    expect(shown[1]).toMatchObject({ status: 'queued', step: 'poll', owner: null, runningForMs: null, nextStepAt: at(30), failures: 0 });
    expect(shown[2]).toMatchObject({ owner: null, nextStepAt: at(90) }); // the last step's owner is not this one's
    expect(shown[3]).toMatchObject({ step: 'child', nextStepAt: null });
    expect((await inProgressJobs(db.sql, { limit: 2 })).map((j) => j.id)).toEqual([running, soon]);

    const ids = async (inProgress?: boolean) => new Set((await listJobs(db.sql, { inProgress })).jobs.map((j) => j.id));
    expect(await ids(true)).toEqual(new Set([running, soon, later, parked]));
    expect(await ids(false)).toEqual(new Set([fresh, finished]));
    expect((await ids()).size).toBe(6);
  });
});
