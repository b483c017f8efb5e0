import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  connect, defineJobType, done, enqueue, enqueueBatch, getJob, JobRegistry, next, runSteps, sampleJobTypes, type Sql, type StepLogLine,
} from '../../queue/index.ts';
import { migrate } from '../../queue/migrate.ts';
import { countdown } from '../../queue/samples.ts';
import { startEmbeddedPostgres, type EmbeddedPostgresHandle } from '../../scripts/embedded-postgres.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { checkHistory } from '../../scripts/lib/history.ts';

/**
 * Database faults: a connection cut mid-transaction (pg_terminate_backend) and a Postgres
 * restart in the middle of a run. What must hold: the caller gets the error (an enqueue rejects;
 * runSteps rejects with the database's error at its next claim, and each step it had in flight
 * ends on its own: a settle cut by a blip is written again within the lease, and a step is
 * logged `lost` only when its settle could not reach the database before then), the cut
 * transaction leaves nothing behind, work resumes afterwards, and no job is lost or doubled.
 *
 * After a fault the tests carry on with a new client, as the Worker does (a client per
 * invocation) and as a long-lived runner must: postgres.js 3.4.9 can leave a connection whose
 * query the server cut unusable — its next query fails with the old backend's error and the
 * slot may then never reconnect (porsager/postgres#1186, #1195; fixes in open PRs #1209, #1215).
 */

/** A deploy-like job: one checkpointed step, then a done whose SettleEffect writes the service's desired state. */
const deploy = defineJobType({
  type: 'fault_deploy',
  payload: z.object({ serviceId: z.string() }),
  leaseMs: 1000,
  maxAttempts: 5,
  async run({ payload, checkpoint }) {
    if (!checkpoint.built) return next('release', { checkpoint: { built: true } });
    return done({ released: payload.serviceId }, async (tx) => {
      await tx`update platform.services set desired_state = desired_state || jsonb_build_object(
                 'image', 'v2', 'releases', coalesce((desired_state->>'releases')::int, 0) + 1) where id = ${payload.serviceId}`;
    });
  },
});

/** Waits until a backend with this application_name is blocked on a lock, and returns its pid. */
async function blockedBackend(admin: Sql, applicationName: string): Promise<number> {
  for (let i = 0; i < 400; i++) {
    const [row] = await admin`select pid from pg_stat_activity where application_name = ${applicationName} and wait_event_type = 'Lock'`;
    if (row) return row.pid as number;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`no backend of ${applicationName} blocked on a lock`);
}

/** Holds a row lock in an open transaction until release() is called. */
async function holdRowLock(sql: Sql, lock: (tx: postgres.TransactionSql) => Promise<unknown>): Promise<{ release(): Promise<void> }> {
  let release!: () => void;
  let locked!: () => void;
  const isLocked = new Promise<void>((r) => (locked = r));
  const released = new Promise<void>((r) => (release = r));
  const done = sql.begin(async (tx) => {
    await lock(tx as never);
    locked();
    await released;
  });
  await isLocked;
  return {
    async release() {
      release();
      await done;
    },
  };
}

/**
 * Makes every transaction that wrote platform.services wait at its COMMIT (a deferred constraint
 * trigger takes an advisory lock we hold) until release(). The connection is cut while it waits
 * there: cutting inside sql.begin() before COMMIT makes postgres.js 3.4.9 write its ROLLBACK to
 * the dead socket, which throws an uncaught TypeError (porsager/postgres#1133).
 */
async function blockCommitsTouchingServices(sql: Sql): Promise<{ release(): Promise<void> }> {
  await sql.unsafe(`
    create or replace function public.test_block_commit() returns trigger language plpgsql as $$
      begin perform pg_advisory_xact_lock(4242); return null; end $$;
    drop trigger if exists services_block_commit on platform.services;
    create constraint trigger services_block_commit after insert or update on platform.services
      deferrable initially deferred for each row execute function public.test_block_commit();`);
  const lock = await holdRowLock(sql, (tx) => tx`select pg_advisory_xact_lock(4242)`);
  return {
    async release() {
      await lock.release();
      await sql`drop trigger services_block_commit on platform.services`;
    },
  };
}

const counts = async (sql: Sql) => {
  const [row] = await sql`select (select count(*)::int from worker.jobs) as jobs, (select count(*)::int from worker.job_history) as events,
                                 (select count(*)::int from platform.services) as services`;
  return row;
};

describe('a connection cut mid-transaction', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
    await new JobRegistry([...sampleJobTypes, deploy]).sync(db.sql);
  });

  it('an enqueue batch cut halfway writes none of its jobs, and the batch goes in whole afterwards', async () => {
    const app = 'faults-enqueue';
    const client = connect(db.url, { max: 1, applicationName: app });
    // a waiting job of key k-50: the batch supersedes it at its 51st job, and blocks there on our lock
    const { job: waiting } = await enqueue(db.sql, { type: 'uppercase', payload: { text: 'old' }, dedupeKey: 'k-50', delayMs: 3_600_000 });
    const before = await counts(db.sql);
    const lock = await holdRowLock(db.sql, (tx) => tx`select 1 from worker.jobs where id = ${waiting.id} for update`);
    const batch = Array.from({ length: 100 }, (_, i) => ({ type: 'uppercase', payload: { text: `b${i}` }, dedupeKey: `k-${i}`, delayMs: 3_600_000 }));
    const attempt = enqueueBatch(client, batch).then(() => null, (e: unknown) => e as { code?: string; message: string });
    const pid = await blockedBackend(db.sql, app);
    // by now the batch has inserted 50 jobs and 50 events inside its transaction
    await db.sql`select pg_terminate_backend(${pid})`;
    const error = await attempt;
    await lock.release();
    expect(error).not.toBeNull();
    expect(`${error!.code} ${error!.message}`).toMatch(/57P01|terminat|CONNECTION_CLOSED/);
    expect(await counts(db.sql)).toEqual(before);
    expect((await getJob(db.sql, waiting.id))!.job.status).toBe('queued');
    await client.end({ timeout: 1 });

    const fresh = connect(db.url, { max: 1 });
    const results = await enqueueBatch(fresh, batch);
    expect(results).toHaveLength(100);
    expect(results[50]!.superseded).toBe(waiting.id);
    await fresh.end();
  });

  it("a caller's transaction cut at its COMMIT leaves neither its own row nor the job", async () => {
    const app = 'faults-tx';
    const client = connect(db.url, { max: 1, applicationName: app });
    const before = await counts(db.sql);
    const gate = await blockCommitsTouchingServices(db.sql);
    const attempt = client
      .begin(async (tx) => {
        await tx`insert into platform.services (id, desired_state) values ('svc-tx', '{}')`;
        await enqueue(tx, { type: 'uppercase', payload: { text: 'with my row' } });
      })
      .then(() => null, (e: unknown) => e as { code?: string; message: string });
    await db.sql`select pg_terminate_backend(${await blockedBackend(db.sql, app)})`;
    const error = await attempt;
    await gate.release();
    expect(`${error?.code} ${error?.message}`).toMatch(/57P01|terminat|CONNECTION_CLOSED/);
    expect(await counts(db.sql)).toEqual(before);
    await client.end({ timeout: 1 });
  });

  it("a runner's settle statement cut mid-flight writes nothing, and is written again: the step settles once, its attempt unspent", async () => {
    const { job } = await enqueue(db.sql, { type: 'countdown', payload: { n: 1 } });
    const app = 'faults-settle';
    const runnerSql = connect(db.url, { max: 2, applicationName: app });
    const lines: StepLogLine[] = [];
    const runner = { sql: runnerSql, registry: new JobRegistry(sampleJobTypes), workerId: 'settle-victim', log: (l: StepLogLine) => lines.push(l) };
    // the step runs, then its checkpoint (one fenced UPDATE … INSERT event) waits on our lock of the row, and is cut there
    let release: Promise<{ release(): Promise<void> }> | undefined;
    const slow = defineJobType({
      ...countdown,
      async run(ctx) {
        release = holdRowLock(db.sql, (tx) => tx`select 1 from worker.jobs where id = ${ctx.job.id} for update`);
        await release;
        return next('count', { checkpoint: { taken: 1 } });
      },
    });
    const run = runSteps({ ...runner, registry: new JobRegistry([slow]) }, { maxJobs: 1 });
    await db.sql`select pg_terminate_backend(${await blockedBackend(db.sql, app)})`;
    const lock = await release!;
    setTimeout(() => void lock.release(), 50); // the settle written again waits for our lock too
    const cut = await run;
    // a blip is not the step's failure: the same checkpoint is written again, within the lease
    expect(cut).toMatchObject({ claimed: 1, continued: 1, retried: 0, lost: 0 });
    expect(lines.at(-1)).toMatchObject({ jobId: job.id, outcome: 'continued', settleRetries: expect.any(Number) });
    const mid = (await getJob(db.sql, job.id))!;
    expect(mid.job).toMatchObject({ status: 'queued', step: 'count', checkpoint: { taken: 1 }, attempts: 0, crashes: 0 });
    expect(mid.events.map((e) => e.kind)).toEqual(['enqueued', 'claimed', 'checkpoint']);
    await runnerSql.end({ timeout: 1 });

    const fresh = connect(db.url, { max: 2 });
    await runSteps({ ...runner, sql: fresh });
    const after = (await getJob(db.sql, job.id))!;
    expect(after.job).toMatchObject({ status: 'done', result: { steps: 1 } });
    expect(after.events.map((e) => e.kind)).toEqual(['enqueued', 'claimed', 'checkpoint', 'claimed', 'done']);
    await fresh.end();
  });

  it("a runner's settle with an effect cut at its COMMIT writes neither, and is written again: the effect lands once", async () => {
    await db.sql`insert into platform.services (id, desired_state) values ('svc-1', '{"image": "v1"}')`;
    const { job } = await enqueue(db.sql, { type: 'fault_deploy', payload: { serviceId: 'svc-1' } });
    const app = 'faults-effect';
    const runnerSql = connect(db.url, { max: 2, applicationName: app });
    const lines: StepLogLine[] = [];
    const now = new Date(Date.now() + 1_000);
    const runner = { sql: runnerSql, registry: new JobRegistry([deploy]), workerId: 'effect-victim', clock: () => now, log: (l: StepLogLine) => lines.push(l) };
    expect(await runSteps(runner, { maxJobs: 1 })).toMatchObject({ claimed: 1, continued: 1 });

    // the release step's settle: the fenced done and the desired-state write, then its COMMIT is held and the connection cut
    const gate = await blockCommitsTouchingServices(db.sql);
    const run = runSteps(runner, { maxJobs: 1 });
    await db.sql`select pg_terminate_backend(${await blockedBackend(db.sql, app)})`;
    // nothing of the cut transaction is there
    const [svcCut] = await db.sql`select desired_state from platform.services where id = 'svc-1'`;
    expect(svcCut!.desired_state).toEqual({ image: 'v1' });
    await gate.release(); // the settle written again (waiting at its COMMIT meanwhile, or not yet sent) commits
    const cut = await run;
    expect(cut).toMatchObject({ claimed: 1, done: 1, retried: 0, lost: 0 });
    expect(lines.at(-1)).toMatchObject({ jobId: job.id, outcome: 'done', settleRetries: expect.any(Number) });
    const after = (await getJob(db.sql, job.id))!;
    expect(after.job).toMatchObject({ status: 'done', result: { released: 'svc-1' }, attempts: 1, crashes: 0 });
    expect(after.events.map((e) => e.kind)).toEqual(['enqueued', 'claimed', 'checkpoint', 'claimed', 'done']);
    const [svcAfter] = await db.sql`select desired_state from platform.services where id = 'svc-1'`;
    expect(svcAfter!.desired_state).toEqual({ image: 'v2', releases: 1 });
    await runnerSql.end({ timeout: 1 });
  });
});

describe('a Postgres restart in the middle of a run', () => {
  let pg: EmbeddedPostgresHandle;
  let url: string;
  let dataDir: string;
  const clients: Sql[] = [];
  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'starbase-faults-pg-'));
    pg = await startEmbeddedPostgres({ dataDir, persistent: true });
    const admin = postgres(pg.url, { max: 1, onnotice: () => {} });
    await admin.unsafe('create database faults');
    await admin.end();
    const u = new URL(pg.url);
    u.pathname = '/faults';
    url = u.toString();
    const sql = connect(url, { max: 1 });
    await migrate(sql);
    await sql.end();
  }, 60_000);
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.end({ timeout: 1 }).catch(() => {})));
    await pg.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('runners stop with the error and their in-flight steps end logged; after the restart every job finishes exactly once', async () => {
    const JOBS = 300;
    const slowCount = defineJobType({
      type: 'fault_count',
      payload: z.object({ n: z.number().int() }),
      leaseMs: 1000,
      maxAttempts: 10,
      async run({ payload, checkpoint }) {
        await new Promise((r) => setTimeout(r, 15)); // long enough that the stop catches steps mid-flight
        const taken = typeof checkpoint.taken === 'number' ? checkpoint.taken : 0;
        if (taken >= payload.n) return done({ steps: payload.n });
        return next('count', { checkpoint: { taken: taken + 1 } });
      },
    });
    const registry = new JobRegistry([slowCount]);
    let setup = connect(url, { max: 2 });
    clients.push(setup);
    await registry.sync(setup);
    await enqueueBatch(setup, Array.from({ length: JOBS }, () => ({ type: 'fault_count', payload: { n: 3 } })));

    let offset = 0;
    const clock = () => new Date(Date.now() + offset);
    const logs: StepLogLine[] = [];
    let entered = 0;
    // a claim left unanswered by a connection the restart reset is given up after 3 s (30 s by
    // default), and a database refusing connections after 2 s of claims retried (60 s by default)
    const runner = (sql: Sql, i: number) => ({
      sql, registry, workerId: `restart-${i}`, concurrency: 4, clock, claimTimeoutMs: 3_000, databaseGoneMs: 2_000, log: (l: StepLogLine) => logs.push(l),
    });
    const countingRegistry = new JobRegistry([{ ...slowCount, run: (ctx) => (entered++, slowCount.run(ctx)) } as typeof slowCount]);

    // phase 1: three runners, until Postgres stops under them
    const phase1Clients = [0, 1, 2].map((i) => connect(url, { max: 4, applicationName: `restart-${i}` }));
    clients.push(...phase1Clients);
    const phase1 = phase1Clients.map((c, i) => {
      return runSteps({ ...runner(c, i), registry: countingRegistry }, { idleWaitMs: 10 }).then(
        (counts) => ({ counts, error: null as null | { code?: string; message: string } }),
        (error: { code?: string; message: string }) => ({ counts: null, error }),
      );
    });
    for (;;) {
      const [row] = await setup`select count(*)::int as n from worker.job_history where kind = 'checkpoint'`;
      if (row!.n >= JOBS) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    await pg.stop();
    const stopped = await Promise.race([Promise.all(phase1), new Promise<null>((r) => setTimeout(() => r(null), 20_000))]);
    expect(stopped, 'runSteps must neither spin nor hang when the database goes away').not.toBeNull();
    for (const [i, o] of stopped!.entries()) {
      expect(o.error, `runner ${i} reports the database error`).not.toBeNull();
      expect(`${o.error!.code} ${o.error!.message}`).toMatch(/57P01|57P03|terminat|shutting down|ECONNREFUSED|ECONNRESET|EPIPE|CONNECTION_(CLOSED|ENDED|DESTROYED)|CLAIM_TIMEOUT/);
    }
    // the caller ends the broken clients (with a timeout, which also fails a settle the driver
    // left hanging); every step that was in flight has then ended, logged `lost` if it could not settle
    await Promise.all(phase1Clients.map((c) => c.end({ timeout: 1 })));
    for (let i = 0; logs.length < entered && i < 500; i++) await new Promise((r) => setTimeout(r, 10));
    expect(logs).toHaveLength(entered);
    const lost = logs.filter((l) => l.outcome === 'lost');
    expect(lost.every((l) => (l.error ?? '').startsWith('settle failed: '))).toBe(true);
    // while it is down, an enqueue fails at once rather than hanging
    const down = connect(url, { max: 1 });
    clients.push(down);
    const refused = await enqueue(down, { type: 'fault_count', payload: { n: 1 } }).then(() => null, (e: { code?: string }) => e);
    expect(refused?.code).toBe('ECONNREFUSED');

    // phase 2: Postgres is back; new runners rescue the expired leases and finish the run
    await pg.start();
    offset = 5_000;
    const resumed = await Promise.all(
      [0, 1, 2].map((i) => {
        const c = connect(url, { max: 4 });
        clients.push(c);
        return runSteps(runner(c, i));
      }),
    );
    expect(resumed.reduce((n, c) => n + c.claimed, 0)).toBeGreaterThan(0);
    setup = connect(url, { max: 2 });
    clients.push(setup);

    const { jobs, problems, tally } = await checkHistory(setup, { type: 'fault_count', leaseMs: 1000 });
    expect(problems).toEqual([]);
    expect(jobs).toHaveLength(JOBS);
    expect(jobs.every((j) => j.status === 'done')).toBe(true);
    expect(jobs.every((j) => JSON.stringify(j.result) === '{"steps":3}')).toBe(true);
    expect(tally.done).toBe(JOBS);
    // the steps that never settled were rescued, and only those: each crash is one expired lease
    const [sums] = await setup`select sum(crashes)::int as crashes from worker.jobs`;
    expect(sums!.crashes).toBe(tally.leaseExpired);
    expect(tally.leaseExpired).toBeLessThanOrEqual(lost.length + 12);
    console.log(`restart: ${lost.length} steps lost their settle, ${tally.leaseExpired} leases rescued after the restart, ${tally.claims} claims for ${JOBS} jobs × 4 steps`);
  }, 60_000);
});
