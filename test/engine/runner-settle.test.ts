// Postgres matrix: settles batched by concurrent runners.
import type postgres from 'postgres';
import { z } from 'zod';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import {
  connect, defineJobType, done, enqueue, getJob, JobRegistry, next, rescueExpiredLeases, runSteps, type Sql, type StepLogLine,
} from '../../queue/index.ts';
import { SettleFailed, writeSettle } from '../../queue/runner/settle-retry.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';

/**
 * A database blip while a finished step settles is not a crash. The blip here is real: the
 * runner's backend is terminated (pg_terminate_backend) while its settle statement waits on a row
 * lock the test holds, as many times as the case says, and only then is the lock released. The
 * runner must write the settle again within the lease: the job ends as the step said (done,
 * continued, retried), its weight class unchanged, no crash counted, no `escalated` event — even
 * when the rescue of expired leases runs after the lease would have expired.
 */

const LEASE_MS = 60_000;
const COMMIT_LOCK = 4243;
const T0 = new Date('2031-03-01T12:00:00Z');

let db: TestDatabase;
/** The lock the current step's settle will wait on; set by the step, taken by the test. */
let lockHeld: Promise<{ release(): Promise<void> }> | undefined;

/** Holds a row lock in an open transaction until release() is called. */
function holdRowLock(sql: Sql, lock: (tx: postgres.TransactionSql) => Promise<unknown>): Promise<{ release(): Promise<void> }> {
  return new Promise((resolveHeld, rejectHeld) => {
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const finished = sql
      .begin(async (tx) => {
        await lock(tx as never);
        resolveHeld({
          async release() {
            release();
            await finished;
          },
        });
        await released;
      })
      .catch(rejectHeld);
  });
}

/** Waits until a backend with this application_name is blocked on a lock, and returns its pid. */
async function blockedBackend(admin: Sql, applicationName: string): Promise<number> {
  for (let i = 0; i < 2000; i++) {
    const [row] = await admin`select pid from pg_stat_activity where application_name = ${applicationName} and wait_event_type = 'Lock'`;
    if (row) return row.pid as number;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`no backend of ${applicationName} blocked on a lock`);
}

/**
 * Makes every transaction that wrote platform.services wait at its COMMIT (a deferred constraint
 * trigger takes the advisory lock a step holds). A settle with an effect is cut there, not inside
 * sql.begin() before COMMIT: there postgres.js 3.4.9 writes its ROLLBACK to the dead socket and
 * throws an uncaught TypeError (porsager/postgres#1133).
 */
async function blockCommitsTouchingServices(sql: Sql): Promise<() => Promise<void>> {
  await sql.unsafe(`
    create or replace function public.test_settle_blip_commit() returns trigger language plpgsql as $$
      begin perform pg_advisory_xact_lock(${COMMIT_LOCK}); return null; end $$;
    create constraint trigger services_settle_blip_commit after insert or update on platform.services
      deferrable initially deferred for each row execute function public.test_settle_blip_commit();`);
  return async () => {
    await sql`drop trigger services_settle_blip_commit on platform.services`;
  };
}

/** Each kind of step end, so each settle statement meets the blip. */
const blip = defineJobType({
  type: 'settle_blip',
  payload: z.object({ end: z.enum(['done', 'effect', 'continue', 'throw']) }),
  leaseMs: LEASE_MS,
  maxAttempts: 3,
  retry: { baseMs: 1000, maxMs: 1000 },
  async run({ job, payload, step }) {
    if (step !== 'start') return done({ again: true });
    // the settle that follows waits on this lock until the test has cut its connection enough times:
    // the job's row, or for a settle with an effect its COMMIT (see blockCommitsTouchingServices)
    lockHeld = holdRowLock(db.sql, (tx) =>
      payload.end === 'effect' ? tx`select pg_advisory_xact_lock(${COMMIT_LOCK})` : tx`select 1 from worker.jobs where id = ${job.id} for update`,
    );
    await lockHeld;
    switch (payload.end) {
      case 'done':
        return done({ ok: true });
      case 'effect':
        return done({ ok: true }, async (tx) => {
          await tx`insert into platform.services (id, desired_state) values (${`svc-${job.id}`}, '{"released": true}')`;
        });
      case 'continue':
        return next('again', { checkpoint: { first: true }, delayMs: 5_000 });
      case 'throw':
        throw new Error('provider said no');
    }
  },
});

beforeAll(async () => {
  db = await createTestDatabase();
  await new JobRegistry([blip]).sync(db.sql);
});

async function runThroughBlips(end: z.infer<typeof blip.payload>['end'], cuts: number) {
  const { job } = await enqueue(db.sql, { type: 'settle_blip', payload: { end }, runAt: T0 });
  const app = `settle-blip-${end}-${cuts}`;
  const runnerSql = connect(db.url, { max: 3, applicationName: app });
  const lines: StepLogLine[] = [];
  const run = runSteps(
    { sql: runnerSql, registry: new JobRegistry([blip]), workerId: app, clock: () => T0, log: (l) => lines.push(l) },
    { maxJobs: 1 },
  );
  for (let i = 0; i < cuts; i++) {
    await db.sql`select pg_terminate_backend(${await blockedBackend(db.sql, app)})`;
  }
  await (await lockHeld!).release();
  const counts = await run;
  await runnerSql.end({ timeout: 1 });
  // the lease would have run out by now: a step left unsettled is rescued here (a crash)
  const rescued = await rescueExpiredLeases(db.sql, { now: new Date(T0.getTime() + 2 * LEASE_MS) });
  return { job, counts, lines, rescued, after: (await getJob(db.sql, job.id))! };
}

describe('a database blip while a finished step settles', () => {
  it.each([1, 2, 3])('a done step (group commit) cut %i time(s) ends done, no crash, no escalation', async (cuts) => {
    const { counts, lines, rescued, after } = await runThroughBlips('done', cuts);
    expect(after.job).toMatchObject({ status: 'done', result: { ok: true }, weight: 'light', crashes: 0, attempts: 1 });
    expect(rescued).toEqual({ requeued: 0, failed: 0, oomKilled: 0 });
    expect(counts).toMatchObject({ claimed: 1, done: 1, lost: 0, retried: 0 });
    expect(after.events.map((e) => e.kind)).toEqual(['enqueued', 'claimed', 'done']);
    expect(lines).toEqual([expect.objectContaining({ outcome: 'done' })]);
  });

  it('a done step with a settle effect cut twice at its COMMIT ends done, its effect written once', async () => {
    const unblock = await blockCommitsTouchingServices(db.sql);
    const { job, counts, after } = await runThroughBlips('effect', 2).finally(unblock);
    expect(counts).toMatchObject({ claimed: 1, done: 1, lost: 0 });
    expect(after.job).toMatchObject({ status: 'done', weight: 'light', crashes: 0, attempts: 1 });
    expect(after.events.map((e) => e.kind)).toEqual(['enqueued', 'claimed', 'done']);
    const services = await db.sql`select desired_state from platform.services where id = ${`svc-${job.id}`}`;
    expect(services.map((s) => s.desired_state)).toEqual([{ released: true }]);
  });

  it('a continued step cut twice saves its checkpoint once; the attempt is not spent', async () => {
    const { counts, rescued, after } = await runThroughBlips('continue', 2);
    expect(counts).toMatchObject({ claimed: 1, continued: 1, retried: 0, lost: 0 });
    expect(rescued).toEqual({ requeued: 0, failed: 0, oomKilled: 0 });
    expect(after.job).toMatchObject({ status: 'queued', step: 'again', checkpoint: { first: true }, weight: 'light', crashes: 0, attempts: 0 });
    expect(after.events.map((e) => e.kind)).toEqual(['enqueued', 'claimed', 'checkpoint']);
  });

  it('a failed step cut twice is retried as the step said, not escalated', async () => {
    const { counts, rescued, after } = await runThroughBlips('throw', 2);
    expect(counts).toMatchObject({ claimed: 1, retried: 1, lost: 0 });
    expect(rescued).toEqual({ requeued: 0, failed: 0, oomKilled: 0 });
    expect(after.job).toMatchObject({ status: 'queued', lastError: 'provider said no', weight: 'light', crashes: 0, attempts: 1 });
    expect(after.events.map((e) => e.kind)).toEqual(['enqueued', 'claimed', 'retry']);
  });

  it('gives up once the lease is gone: a settle the database refuses longer than the lease is left to the rescue', async () => {
    const short = defineJobType({ ...blip, type: 'settle_blip_short', leaseMs: 1_000 });
    await new JobRegistry([short]).sync(db.sql);
    const { job } = await enqueue(db.sql, { type: 'settle_blip_short', payload: { end: 'done' }, runAt: T0 });
    const app = 'settle-blip-forever';
    const runnerSql = connect(db.url, { max: 3, applicationName: app });
    const lines: StepLogLine[] = [];
    const run = runSteps({ sql: runnerSql, registry: new JobRegistry([short]), workerId: app, clock: () => T0, log: (l) => lines.push(l) }, { maxJobs: 1 });
    // cut every try until the runner stops trying (its step is logged), then let go
    const stopped = run.then(() => true);
    let cut = 0;
    while (!(await Promise.race([stopped, new Promise<false>((r) => setTimeout(() => r(false), 20))]))) {
      const [row] = await db.sql`select pid from pg_stat_activity where application_name = ${app} and wait_event_type = 'Lock'`;
      if (row) {
        await db.sql`select pg_terminate_backend(${row.pid as number})`;
        cut++;
      }
    }
    await (await lockHeld!).release();
    expect(await run).toMatchObject({ claimed: 1, done: 0, lost: 1 });
    expect(cut).toBeGreaterThan(1);
    expect(lines).toEqual([expect.objectContaining({ outcome: 'lost', error: expect.stringMatching(/^settle failed: /), settleRetries: expect.any(Number) })]);
    await runnerSql.end({ timeout: 1 });
    const after = (await getJob(db.sql, job.id))!;
    expect(after.job).toMatchObject({ status: 'running' });
    await db.sql`update worker.jobs set status = 'cancelled', finished_at = now(), locked_until = null, running_pool = null where id = ${job.id}`;
  });
});

describe('a settle the database never answers', () => {
  it('is abandoned as SettleFailed once the lease is no longer known held, not awaited for the driver’s 30 s', async () => {
    const scope = { heldUntil: Date.now() + 200, signal: new AbortController().signal, mayRetry: () => true, retried: () => {} };
    const unanswered = new Promise<never>(() => {}); // a query on a cut connection
    const error = await writeSettle(scope, () => unanswered).then(() => null, (e: unknown) => e);
    expect(error).toBeInstanceOf(SettleFailed);
    expect((error as SettleFailed).message).toMatch(/did not answer the settle while the lease was held/);
  });

  it('keeps waiting while the heartbeat moves the lease on, and takes the answer that comes', async () => {
    // on a pinned clock: a loaded machine delaying a 50 ms heartbeat past the 100 ms it grants
    // must not decide the outcome
    vi.useFakeTimers();
    try {
      const scope = { heldUntil: Date.now() + 100, signal: new AbortController().signal, mayRetry: () => true, retried: () => {} };
      const beat = setInterval(() => (scope.heldUntil = Date.now() + 100), 50);
      const late = new Promise<string>((resolve) => setTimeout(() => resolve('settled'), 400));
      const written = writeSettle(scope, () => late);
      await vi.advanceTimersByTimeAsync(400);
      await expect(written).resolves.toBe('settled');
      clearInterval(beat);
    } finally {
      vi.useRealTimers();
    }
  });
});
