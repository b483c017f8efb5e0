// Postgres matrix: flow control (pauses, rate limits, fairness) at claim time.
import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  claimJobs,
  completeJobs,
  ConflictError,
  defineJobType,
  done,
  enqueue,
  enqueueBatch,
  getJob,
  type Job,
  JobRegistry,
  listPauses,
  listRateLimits,
  NotFoundError,
  pauseClaims,
  RateLimitedError,
  resumeClaims,
  runSteps,
  ValidationError,
} from '../../queue/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';

// Flow control (0210) against the real database: rate limits per key under concurrent
// claimers, a 429's pause of its key, fair queueing under a flood, pause and resume.

const SECOND = 1000;
let db: TestDatabase;
let t0: Date;
const at = (ms: number) => new Date(t0.getTime() + ms);

let busyCalls = 0;
const registry = new JobRegistry([
  defineJobType({ type: 'flow_rated', payload: z.object({ n: z.number() }), rateLimit: { key: 'test:provider', limit: 100, per: '10s' }, run: async () => done() }),
  defineJobType({
    type: 'flow_busy',
    payload: z.object({ n: z.number() }),
    rateLimit: { key: 'test:busy', limit: 1000, per: '1m' },
    async run() {
      busyCalls++;
      if (busyCalls === 1) throw new RateLimitedError('provider answered 429', 30 * SECOND);
      return done();
    },
  }),
  defineJobType({
    type: 'flow_unkeyed_429',
    payload: z.object({}),
    async run() {
      throw new RateLimitedError('provider answered 429', 5 * SECOND);
    },
  }),
  defineJobType({ type: 'flow_fair', payload: z.object({ accountId: z.string() }), fairness: { key: 'account:{accountId}' }, run: async () => done() }),
  defineJobType({ type: 'flow_unfair', payload: z.object({ accountId: z.string() }), run: async () => done() }),
  defineJobType({ type: 'flow_plain', payload: z.object({}), run: async () => done() }),
]);

beforeAll(async () => {
  db = await createTestDatabase();
  await registry.sync(db.sql);
  // every job below is due at t0; claims run on a pinned clock from there
  t0 = new Date(Date.now() + 3_600_000); // past every run_at the file writes, however long it runs
});

async function clearQueue() {
  await db.sql`update worker.jobs set status = 'cancelled', finished_at = now(), locked_until = null where status in ('queued', 'running')`;
  await db.sql`update worker.rate_limits set starts = '{}', paused_until = null, pause_reason = null`;
  await db.sql`delete from worker.pauses`;
}

const claim = (sql: typeof db.sql, now: Date, limit: number, workerId = 'w', pool: string | null = null) =>
  claimJobs(sql, { workerId, pool, limit, now });
const finish = (sql: typeof db.sql, jobs: Job[], now: Date) => completeJobs(sql, jobs.map((job) => ({ job })), { now });

/** The most starts in any closed window of `per` ms, from the claimed events of the history. */
async function busiestWindow(type: string, per: number): Promise<{ max: number; total: number }> {
  const rows = await db.sql`
    select h.at from worker.job_history h join worker.jobs j on j.id = h.job_id
     where j.type = ${type} and h.kind = 'claimed' order by h.at`;
  const starts = rows.map((r) => (r.at as Date).getTime());
  let max = 0;
  for (let i = 0, j = 0; i < starts.length; i++) {
    while (j < starts.length && starts[j]! <= starts[i]! + per) j++;
    max = Math.max(max, j - i);
  }
  return { max, total: starts.length };
}

describe('rate limits per key', () => {
  it('over 60 s at 100 per 10 s, 3 concurrent runners never start more than 100 in any 10 s window', async () => {
    await clearQueue();
    await enqueueBatch(db.sql, Array.from({ length: 1000 }, (_, n) => ({ type: 'flow_rated', payload: { n } })));
    await enqueueBatch(db.sql, Array.from({ length: 300 }, () => ({ type: 'flow_plain', payload: {} })));
    const runners = [db.client(1), db.client(1), db.client(1)];
    let plain = 0;
    // every 250 ms of the pinned clock each runner claims a batch of 20 and completes it; the
    // runners' clocks are a few ms apart, so their claims reach the key out of time order
    for (let ms = 0; ms <= 60 * SECOND; ms += 250) {
      await Promise.all(runners.map(async (sql, i) => {
        const now = at(ms + i * 7);
        const jobs = await claim(sql, now, 20, `runner-${i}`);
        plain += jobs.filter((j) => j.type === 'flow_plain').length;
        await finish(sql, jobs, now);
      }));
    }
    const { max, total } = await busiestWindow('flow_rated', 10 * SECOND);
    expect(max).toBe(100);
    // the limit is reached, not merely respected: one full window each 10 s (+ a claim tick)
    expect(total).toBeGreaterThanOrEqual(500);
    expect(total).toBeLessThanOrEqual(600);
    expect(plain).toBe(300); // other jobs flow past the full key
    console.log(`rate limit 100/10s, 3 runners, 60 s pinned: ${total} starts, busiest 10 s window ${max}`);
  });

  it('holds the limit exactly when 20 claimers take one key at the same instant', async () => {
    await clearQueue();
    await enqueueBatch(db.sql, Array.from({ length: 300 }, (_, n) => ({ type: 'flow_rated', payload: { n } })));
    const clients = Array.from({ length: 20 }, () => db.client(1));
    const claimed = (await Promise.all(clients.map((sql, i) => claim(sql, at(0), 8, `c-${i}`)))).flat();
    expect(claimed.length).toBeLessThanOrEqual(100);
    // what a claimer that found the key's row taken skipped, the next claims take, up to the limit
    const more = [];
    for (let i = 0; i < 10; i++) more.push(...(await claim(db.sql, at(1), 50)));
    expect(claimed.length + more.length).toBe(100);
    const [state] = (await listRateLimits(db.sql, { now: at(1) })).filter((r) => r.key === 'test:provider');
    expect(state).toMatchObject({ limit: 100, perMs: 10 * SECOND, startedInWindow: 100, queued: 200 });
    // the window slides: 10 s after the first starts (and not before) there is room again
    expect(await claim(db.sql, at(10 * SECOND - 1), 50)).toHaveLength(0);
    expect((await claim(db.sql, at(10 * SECOND + 1), 50)).length).toBeGreaterThan(0);
  });

  it("a step's 429 pauses its key until Retry-After: the job goes again then with its attempt unspent, the key's other jobs untouched", async () => {
    await clearQueue();
    busyCalls = 0;
    const first = (await enqueue(db.sql, { type: 'flow_busy', payload: { n: 1 } })).job;
    const runner = { sql: db.sql, registry, workerId: 'busy', concurrency: 1, clock: () => at(0) };
    const counts = await runSteps(runner, { maxJobs: 1 });
    expect(counts.released).toBe(1);
    const paused = (await getJob(db.sql, first.id))!;
    expect(paused.job).toMatchObject({ status: 'queued', attempts: 0, runAt: at(30 * SECOND) });
    expect(paused.events.at(-1)).toMatchObject({ kind: 'lease_released', detail: { rateKey: 'test:busy', reason: 'rate limited: provider answered 429' } });
    const [state] = (await listRateLimits(db.sql, { now: at(0) })).filter((r) => r.key === 'test:busy');
    expect(state!.pausedUntil).toEqual(at(30 * SECOND));

    // another job of the key, due now, is skipped and left as it was; other types still run
    const second = (await enqueue(db.sql, { type: 'flow_busy', payload: { n: 2 } })).job;
    await enqueue(db.sql, { type: 'flow_plain', payload: {} });
    const during = await claim(db.sql, at(29 * SECOND), 10);
    expect(during.map((j) => j.type)).toEqual(['flow_plain']);
    const untouched = (await getJob(db.sql, second.id))!;
    expect(untouched.job).toMatchObject({ status: 'queued', attempts: 0, runAt: second.runAt });
    expect(untouched.events.map((e) => e.kind)).toEqual(['enqueued']);

    const after = await claim(db.sql, at(30 * SECOND), 10);
    expect(after.map((j) => j.id).sort()).toEqual([first.id, second.id].sort());
    expect(after.find((j) => j.id === first.id)!.attempts).toBe(1);
  });

  it('a job without a rate key that throws a rate-limit error is retried after Retry-After, spending the attempt', async () => {
    await clearQueue();
    const { job } = await enqueue(db.sql, { type: 'flow_unkeyed_429', payload: {} });
    await runSteps({ sql: db.sql, registry, workerId: 'x', concurrency: 1, clock: () => at(0) }, { maxJobs: 1 });
    const after = (await getJob(db.sql, job.id))!;
    expect(after.job).toMatchObject({ status: 'queued', runAt: at(5 * SECOND) });
    expect(after.events.at(-1)!.kind).toBe('retry');
  });

  it('refuses a declaration the table could not hold, naming the field', () => {
    const base = { payload: z.object({}), run: async () => done() };
    expect(() => defineJobType({ ...base, type: 'bad', rateLimit: { key: 'p:{x}', limit: 1, per: '1m' } })).toThrow(/rateLimit.key/);
    expect(() => defineJobType({ ...base, type: 'bad', rateLimit: { key: 'p', limit: 0, per: '1m' } })).toThrow(/rateLimit.limit/);
    expect(() => defineJobType({ ...base, type: 'bad', rateLimit: { key: 'p', limit: 1, per: '5 minutes' } })).toThrow(/rateLimit.per/);
    expect(() => defineJobType({ ...base, type: 'bad', fairness: { key: '{accountId}' } })).toThrow(/fairness.key/);
    const clash = new JobRegistry([
      defineJobType({ ...base, type: 'clash_a', rateLimit: { key: 'p', limit: 1, per: '1m' } }),
      defineJobType({ ...base, type: 'clash_b', rateLimit: { key: 'p', limit: 2, per: '1m' } }),
    ]);
    return expect(clash.sync(db.sql)).rejects.toThrow(/clash_a and clash_b declare rate key p with different limits/);
  });
});

describe('fair queueing', () => {
  async function flood(type: string) {
    for (let chunk = 0; chunk < 10; chunk++) {
      await enqueueBatch(db.sql, Array.from({ length: 1000 }, () => ({ type, payload: { accountId: 'a' } })));
    }
    return (await enqueue(db.sql, { type, payload: { accountId: 'b' } })).job;
  }

  it("with account A holding 10,000 due jobs, account B's one job starts in the next claim batch", async () => {
    await clearQueue();
    const b = await flood('flow_fair');
    const batch = await claim(db.sql, at(0), 128);
    expect(batch).toHaveLength(128);
    expect(batch.map((j) => j.id)).toContain(b.id);
    expect(batch.filter((j) => j.payload.accountId === 'a')).toHaveLength(127);
  });

  it('without a fairness key the same flood holds B back (the control)', async () => {
    await clearQueue();
    const b = await flood('flow_unfair');
    expect((await claim(db.sql, at(0), 128)).map((j) => j.id)).not.toContain(b.id);
  });

  it('under 3 concurrent claimers the flood still lets B through in the first batches, each job once', async () => {
    await clearQueue();
    const b = await flood('flow_fair');
    const clients = [db.client(1), db.client(1), db.client(1)];
    const claimed = (await Promise.all(clients.map((sql, i) => claim(sql, at(0), 64, `f-${i}`)))).flat();
    expect(new Set(claimed.map((j) => j.id)).size).toBe(claimed.length);
    expect(claimed.map((j) => j.id)).toContain(b.id);
    expect(claimed.length).toBe(192);
  });

  it('weights give a key that many turns per round', async () => {
    await clearQueue();
    await enqueueBatch(db.sql, ['a', 'b', 'c'].flatMap((accountId) => Array.from({ length: 50 }, () => ({ type: 'flow_fair', payload: { accountId } }))));
    await db.sql`insert into worker.fair_weights (key, weight) values ('account:a', 3) on conflict (key) do update set weight = 3`;
    const batch = await claim(db.sql, at(0), 25);
    const count = (k: string) => batch.filter((j) => j.payload.accountId === k).length;
    expect([count('a'), count('b'), count('c')]).toEqual([15, 5, 5]);
    await db.sql`delete from worker.fair_weights`;
  });
});

describe('pause and resume', () => {
  it("a paused type's jobs stay queued as they are while others run; resume lets them go", async () => {
    await clearQueue();
    const { job } = await enqueue(db.sql, { type: 'flow_plain', payload: {} });
    await enqueue(db.sql, { type: 'flow_rated', payload: { n: 1 } });
    const pause = await pauseClaims(db.sql, { kind: 'type', name: 'flow_plain', pausedBy: 'ops', reason: 'provider incident' }, { now: at(0) });
    expect(pause).toEqual({ kind: 'type', name: 'flow_plain', pausedBy: 'ops', pausedAt: at(0), reason: 'provider incident' });
    expect(await listPauses(db.sql)).toEqual([pause]);
    expect((await claim(db.sql, at(0), 10)).map((j) => j.type)).toEqual(['flow_rated']);
    expect((await getJob(db.sql, job.id))!.job).toMatchObject({ status: 'queued', attempts: 0, runAt: job.runAt });

    await expect(pauseClaims(db.sql, { kind: 'type', name: 'flow_plain', pausedBy: 'x', reason: 'again' })).rejects.toThrow(ConflictError);
    expect(await resumeClaims(db.sql, 'type', 'flow_plain')).toEqual(pause);
    await expect(resumeClaims(db.sql, 'type', 'flow_plain')).rejects.toThrow(/is not paused/);
    expect((await claim(db.sql, at(0), 10)).map((j) => j.id)).toEqual([job.id]);
  });

  it("a paused pool's runners claim nothing; other pools' runners still do", async () => {
    await clearQueue();
    await enqueue(db.sql, { type: 'flow_plain', payload: {} });
    await enqueue(db.sql, { type: 'flow_plain', payload: {}, pool: 'eu' }); // a job names the pool: it is defined
    await pauseClaims(db.sql, { kind: 'pool', name: 'eu', pausedBy: 'ops', reason: 'maintenance window' });
    expect(await claim(db.sql, at(0), 10, 'eu-1', 'eu')).toHaveLength(0);
    expect(await claim(db.sql, at(0), 10, 'us-1', 'us')).toHaveLength(1);
  });

  it('refuses bad input naming the field, and writes nothing', async () => {
    await clearQueue();
    const refused = async (input: Parameters<typeof pauseClaims>[1]) => pauseClaims(db.sql, input).catch((e: unknown) => e);
    expect(await refused({ kind: 'job' as 'type', name: 'flow_plain', pausedBy: 'ops', reason: 'r' })).toMatchObject({ field: 'kind' });
    expect(await refused({ kind: 'type', name: 'flow_plain', pausedBy: 'ops', reason: '  ' })).toMatchObject({ field: 'reason' });
    expect(await refused({ kind: 'type', name: 'flow_plain', pausedBy: '', reason: 'r' })).toBeInstanceOf(ValidationError);
    expect(await refused({ kind: 'type', name: 'no_such_type', pausedBy: 'ops', reason: 'r' })).toBeInstanceOf(NotFoundError);
    // a pool no capacity row and no job names is a typo, not a pause of nothing
    const unknownPool = await refused({ kind: 'pool', name: 'no-such-pool', pausedBy: 'ops', reason: 'r' });
    expect(unknownPool).toBeInstanceOf(NotFoundError);
    expect((unknownPool as Error).message).toMatch(/unknown pool "no-such-pool"/);
    expect(await listPauses(db.sql)).toEqual([]);
  });

  it('pauses a pool its capacity row defines before any job names it', async () => {
    await clearQueue();
    await db.sql`insert into worker.pool_capacity (pool, max_running_weight) values ('flow-defined', 0)`;
    try {
      expect(await pauseClaims(db.sql, { kind: 'pool', name: 'flow-defined', pausedBy: 'ops', reason: 'r' })).toMatchObject({ kind: 'pool', name: 'flow-defined' });
      await resumeClaims(db.sql, 'pool', 'flow-defined');
    } finally {
      await db.sql`delete from worker.pool_capacity where pool = 'flow-defined'`;
    }
  });
});
