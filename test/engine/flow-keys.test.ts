// Postgres matrix: flow control keys at enqueue and claim.
import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  alertUnclaimedJobs, claimJobs, ConflictError, defineJobType, done, enqueue, enqueueBatch, getJob, JobRegistry, listRateLimits, NotFoundError,
  pauseClaims, RateLimitedError, resumeClaims, resumeRateKey, runSteps, ValidationError,
} from '../../queue/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';

// An enqueue's own rate limit and fairness key (0240), resuming a rate key a 429 paused, and
// the unclaimed_jobs alert leaving out jobs a pause holds.

const SECOND = 1000;
let db: TestDatabase;
let t0: Date;
const at = (ms: number) => new Date(t0.getTime() + ms);
let busy = 0;
const registry = new JobRegistry([
  defineJobType({ type: 'keys_plain', payload: z.object({ n: z.number().optional() }), run: async () => done() }),
  defineJobType({ type: 'keys_rated', payload: z.object({ n: z.number().optional() }), rateLimit: { key: 'keys:type', limit: 50, per: '1m' }, run: async () => done() }),
  defineJobType({ type: 'keys_fair', payload: z.object({ accountId: z.string().optional() }), fairness: { key: 'account:{accountId}' }, run: async () => done() }),
  defineJobType({
    type: 'keys_busy',
    payload: z.object({}),
    rateLimit: { key: 'keys:busy', limit: 100, per: '1m' },
    async run() {
      if (++busy === 1) throw new RateLimitedError('provider answered 429', 600 * SECOND);
      return done();
    },
  }),
]);

beforeAll(async () => {
  db = await createTestDatabase();
  await registry.sync(db.sql);
  t0 = new Date(Date.now() + 3_600_000);
});

async function clear() {
  await db.sql`update worker.jobs set status = 'cancelled', finished_at = now(), locked_until = null where status in ('queued', 'running')`;
  await db.sql`update worker.rate_limits set starts = '{}', paused_until = null, pause_reason = null`;
  await db.sql`delete from worker.pauses`;
  await db.sql`delete from worker.alerts`;
}
const keysOf = async (id: string) => (await db.sql`select rate_key, fair_key from worker.jobs where id = ${id}`)[0]!;
const jobCount = async () => (await db.sql`select count(*)::int as n from worker.jobs`)[0]!.n as number;
const rateKeyCount = async () => (await db.sql`select count(*)::int as n from worker.rate_limits`)[0]!.n as number;
const claim = (now: Date, limit: number) => claimJobs(db.sql, { workerId: 'w', limit, now });

describe("an enqueue's own rate limit", () => {
  it('creates its key and holds its jobs to it; another type naming the key shares the window', async () => {
    await clear();
    const key = `keys:own:${Date.now()}`;
    for (let i = 0; i < 4; i++) await enqueue(db.sql, { type: 'keys_plain', payload: { n: i }, rateLimit: { key, limit: 3, per: '10s' } });
    const { job } = await enqueue(db.sql, { type: 'keys_rated', payload: {}, rateLimit: { key, limit: 3, per: 10_000 } });
    expect(await keysOf(job.id)).toEqual({ rate_key: key, fair_key: null }); // over the type's keys:type
    expect(await claim(at(0), 10)).toHaveLength(3);
    expect(await claim(at(9 * SECOND), 10)).toHaveLength(0);
    expect(await claim(at(10 * SECOND + 1), 10)).toHaveLength(2);
    const [state] = (await listRateLimits(db.sql, { now: at(10 * SECOND + 1) })).filter((r) => r.key === key);
    expect(state).toMatchObject({ limit: 3, perMs: 10_000, startedInWindow: 2 });
  });

  it("refuses a key's other limit or window with a conflict naming both, and writes nothing", async () => {
    const key = `keys:conflict:${Date.now()}`;
    await enqueue(db.sql, { type: 'keys_plain', payload: {}, rateLimit: { key, limit: 5, per: '1m' } });
    const jobs = await jobCount();
    for (const other of [{ limit: 6, per: '1m' }, { limit: 5, per: '59s' }]) {
      const error = await enqueue(db.sql, { type: 'keys_plain', payload: {}, rateLimit: { key, ...other } }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ConflictError);
      expect((error as ConflictError).field).toBe('rateLimit');
      expect((error as Error).message).toMatch(new RegExp(`rate key "${key}" is limited to 5 per 60000 ms`));
    }
    // the type's key is a key like any other: its declared limit holds
    await expect(enqueue(db.sql, { type: 'keys_plain', payload: {}, rateLimit: { key: 'keys:type', limit: 1, per: '1m' } })).rejects.toThrow(ConflictError);
    // a batch with one conflicting element writes none of them
    await expect(enqueueBatch(db.sql, [{ type: 'keys_plain', payload: {} }, { type: 'keys_plain', payload: {}, rateLimit: { key, limit: 9, per: '1m' } }]))
      .rejects.toThrow(ConflictError);
    expect(await jobCount()).toBe(jobs);
    // the same limit, written either way, is the same key
    await enqueue(db.sql, { type: 'keys_plain', payload: {}, rateLimit: { key, limit: 5, per: 60_000 } });
  });

  it('two enqueues creating one new key with different limits at once: one wins, the other is refused', async () => {
    for (let round = 0; round < 10; round++) {
      const key = `keys:race:${Date.now()}:${round}`;
      const clients = [db.client(1), db.client(1)];
      const results = await Promise.allSettled(clients.map((sql, i) => enqueue(sql, { type: 'keys_plain', payload: {}, rateLimit: { key, limit: i + 1, per: '1m' } })));
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      const refused = results.find((r) => r.status === 'rejected') as PromiseRejectedResult;
      expect(refused.reason).toBeInstanceOf(ConflictError);
    }
  });

  it('refuses bad input naming the field, and writes nothing', async () => {
    const jobs = await jobCount();
    const keys = await rateKeyCount();
    const bad: Array<[unknown, RegExp, string]> = [
      [{ key: 'p:{x}', limit: 1, per: '1m' }, /rateLimit.key must be 1 to 200 characters of literal text/, 'rateLimit.key'],
      [{ key: '', limit: 1, per: '1m' }, /rateLimit.key/, 'rateLimit.key'],
      [{ key: 'k', limit: 0, per: '1m' }, /rateLimit.limit must be an integer from 1 to 100000/, 'rateLimit.limit'],
      [{ key: 'k', limit: 1.5, per: '1m' }, /rateLimit.limit/, 'rateLimit.limit'],
      [{ key: 'k', limit: '5', per: '1m' }, /rateLimit.limit/, 'rateLimit.limit'],
      [{ key: 'k', limit: 1, per: '2w' }, /rateLimit.per must be 1 s to 7 days/, 'rateLimit.per'],
      [{ key: 'k', limit: 1, per: 999 }, /rateLimit.per/, 'rateLimit.per'],
      [{ key: 'k', limit: 1, per: '8d' }, /rateLimit.per/, 'rateLimit.per'],
      [{ key: 'k', limit: 1 }, /rateLimit.per/, 'rateLimit.per'],
      [{ key: 'k', limit: 1, per: '1m', burst: 2 }, /rateLimit must be an object \{key, limit, per\}/, 'rateLimit'],
      ['k', /rateLimit must be an object/, 'rateLimit'],
    ];
    for (const [rateLimit, message, field] of bad) {
      const error = await enqueue(db.sql, { type: 'keys_plain', payload: {}, rateLimit: rateLimit as never }).catch((e: unknown) => e);
      expect(error, JSON.stringify(rateLimit)).toBeInstanceOf(ValidationError);
      expect((error as Error).message).toMatch(message);
      expect((error as ValidationError).field).toBe(field);
      // the batch names the element
      const batch = await enqueueBatch(db.sql, [{ type: 'keys_plain', payload: {} }, { type: 'keys_plain', payload: {}, rateLimit: rateLimit as never }]).catch((e: unknown) => e);
      expect((batch as ValidationError).field).toBe(`jobs[1].${field}`);
    }
    for (const fairnessKey of ['', ' ', 'x'.repeat(201)]) {
      const error = await enqueue(db.sql, { type: 'keys_plain', payload: {}, fairnessKey }).catch((e: unknown) => e);
      expect((error as ValidationError).field).toBe('fairnessKey');
    }
    expect(await jobCount()).toBe(jobs);
    expect(await rateKeyCount()).toBe(keys);
  });

  it('is part of a submit key\'s request: the same one is the duplicate, another is a conflict', async () => {
    const submitKey = `keys-submit-${Date.now()}`;
    const rateLimit = { key: 'keys:submit', limit: 10, per: '1m' };
    const first = await enqueue(db.sql, { type: 'keys_plain', payload: {}, submitKey, rateLimit });
    const again = await enqueue(db.sql, { type: 'keys_plain', payload: {}, submitKey, rateLimit: { ...rateLimit, per: 60_000 } });
    expect(again).toMatchObject({ duplicate: true, job: { id: first.job.id } });
    await expect(enqueue(db.sql, { type: 'keys_plain', payload: {}, submitKey })).rejects.toThrow(/already used for a different request/);
    await expect(enqueue(db.sql, { type: 'keys_plain', payload: {}, submitKey, fairnessKey: 'a' })).rejects.toThrow(ConflictError);
  });

  it('from SQL: worker.enqueue_job takes rate_limit and fairness_key; the plain batch keeps the type\'s', async () => {
    const [row] = await db.sql`
      select id, rate_key, fair_key from worker.enqueue_job('keys_plain', '{}', rate_limit => '{"key": "keys:sql", "limit": 7, "per": "1h"}', fairness_key => 'tenant:1')`;
    expect(row).toMatchObject({ rate_key: 'keys:sql', fair_key: 'tenant:1' });
    const [state] = (await listRateLimits(db.sql)).filter((r) => r.key === 'keys:sql');
    expect(state).toMatchObject({ limit: 7, perMs: 3_600_000 });
    const [plain] = await enqueueBatch(db.sql, [{ type: 'keys_rated', payload: {} }, { type: 'keys_rated', payload: {} }]);
    expect(await keysOf(plain!.job.id)).toEqual({ rate_key: 'keys:type', fair_key: null });
    const [own] = await enqueueBatch(db.sql, [{ type: 'keys_rated', payload: {}, rateLimit: { key: 'keys:sql', limit: 7, per: '1h' }, fairnessKey: 'b' }]);
    expect(await keysOf(own!.job.id)).toEqual({ rate_key: 'keys:sql', fair_key: 'b' });
  });
});

describe("an enqueue's own fairness key", () => {
  it("with tenant A holding 500 due jobs, tenant B's one job starts in the next claim batch", async () => {
    await clear();
    await enqueueBatch(db.sql, Array.from({ length: 500 }, () => ({ type: 'keys_plain', payload: {}, fairnessKey: 'tenant:A' })), { now: at(-60 * SECOND) });
    const { job: b } = await enqueue(db.sql, { type: 'keys_plain', payload: {}, fairnessKey: 'tenant:B' }, { now: at(0) });
    expect(await keysOf(b.id)).toEqual({ rate_key: null, fair_key: 'tenant:B' });
    const batch = await claim(at(SECOND), 10);
    expect(batch.map((j) => j.id)).toContain(b.id);
  });

  it("over a type's fairness template, and the template's refusal names the fairness key", async () => {
    const { job } = await enqueue(db.sql, { type: 'keys_fair', payload: { accountId: 'a1' }, fairnessKey: 'region:eu' });
    expect(await keysOf(job.id)).toMatchObject({ fair_key: 'region:eu' });
    const error = await enqueue(db.sql, { type: 'keys_fair', payload: {} }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as Error).message).toMatch(/payload.accountId must be a non-empty string: it makes this job's fairness key \(account:\{accountId\}\)/);
    expect((error as Error).message).not.toMatch(/concurrency key/);
    expect((error as ValidationError).field).toBe('payload.accountId');
  });
});

describe('resuming a rate key', () => {
  it("ends a 429's pause now: the jobs it queued for the pause's end are due, each with a resumed event", async () => {
    await clear();
    busy = 0;
    const { job } = await enqueue(db.sql, { type: 'keys_busy', payload: {} });
    await runSteps({ sql: db.sql, registry, workerId: 'busy', concurrency: 1, clock: () => at(0) }, { maxJobs: 1 });
    expect((await getJob(db.sql, job.id))!.job.runAt).toEqual(at(600 * SECOND));
    const { job: other } = await enqueue(db.sql, { type: 'keys_busy', payload: {} });
    // a job of the key an operator put later than the pause keeps its time
    const { job: later } = await enqueue(db.sql, { type: 'keys_busy', payload: {}, runAt: at(700 * SECOND) });
    expect(await claim(at(SECOND), 10)).toHaveLength(0);

    const resumed = await resumeRateKey(db.sql, 'keys:busy', 'alice', { now: at(2 * SECOND) });
    expect(resumed).toMatchObject({ key: 'keys:busy', pausedUntil: at(600 * SECOND), pauseReason: 'provider answered 429', jobsDue: 1 });
    const after = (await getJob(db.sql, job.id))!;
    expect(after.job.runAt).toEqual(at(2 * SECOND));
    expect(after.events.at(-1)).toMatchObject({ kind: 'resumed', detail: { rateKey: 'keys:busy', by: 'alice' } });
    const [state] = (await listRateLimits(db.sql, { now: at(2 * SECOND) })).filter((r) => r.key === 'keys:busy');
    expect(state).toMatchObject({ pausedUntil: null, pauseReason: null });
    expect((await claim(at(3 * SECOND), 10)).map((j) => j.id).sort()).toEqual([job.id, other.id].sort());
    expect((await getJob(db.sql, later.id))!.job.runAt).toEqual(at(700 * SECOND));
  });

  it('refuses a key that is not paused (409), an unknown one (404) and a blank one (400)', async () => {
    await expect(resumeRateKey(db.sql, 'keys:busy', 'alice', { now: at(0) })).rejects.toThrow(ConflictError);
    await expect(resumeRateKey(db.sql, 'keys:nope', 'alice')).rejects.toThrow(NotFoundError);
    const blank = await resumeRateKey(db.sql, ' ', 'alice').catch((e: unknown) => e);
    expect((blank as ValidationError).field).toBe('key');
    const nobody = await resumeRateKey(db.sql, 'keys:busy', '').catch((e: unknown) => e);
    expect((nobody as ValidationError).field).toBe('resumedBy');
  });
});

describe('unclaimed_jobs and pauses', () => {
  const min = (m: number) => at(m * 60 * SECOND);
  const open = async () => (await db.sql`select key from worker.alerts where kind = 'unclaimed_jobs' and resolved_at is null order by key`).map((r) => r.key as string);

  it("does not count the jobs of a paused type, of a paused pool (pinned), or of a paused rate key; counts them again once resumed", async () => {
    await clear();
    await enqueue(db.sql, { type: 'keys_plain', payload: {} }, { now: min(0) });
    await enqueue(db.sql, { type: 'keys_fair', payload: { accountId: 'a' }, pool: 'frozen' }, { now: min(0) });
    await enqueue(db.sql, { type: 'keys_fair', payload: { accountId: 'b' } }, { now: min(0) }); // unpinned: another pool can run it
    await enqueue(db.sql, { type: 'keys_rated', payload: {}, rateLimit: { key: 'keys:held', limit: 1, per: '1m' } }, { now: min(0) });
    await pauseClaims(db.sql, { kind: 'type', name: 'keys_plain', pausedBy: 'test', reason: 'maintenance' });
    await pauseClaims(db.sql, { kind: 'pool', name: 'frozen', pausedBy: 'test', reason: 'maintenance' });
    await db.sql`update worker.rate_limits set paused_until = ${min(120)}, pause_reason = '429' where key = 'keys:held'`;

    await alertUnclaimedJobs(db.sql, { now: min(30) });
    expect(await open()).toEqual(['keys_fair']); // the unpinned one only

    await resumeClaims(db.sql, 'type', 'keys_plain');
    await resumeClaims(db.sql, 'pool', 'frozen');
    await resumeRateKey(db.sql, 'keys:held', 'test', { now: min(31) });
    await alertUnclaimedJobs(db.sql, { now: min(32) });
    expect(await open()).toEqual(['keys_fair', 'keys_fair:frozen', 'keys_plain', 'keys_rated']);
    // paused again: the open alerts resolve, as for a job claimed
    await pauseClaims(db.sql, { kind: 'type', name: 'keys_plain', pausedBy: 'test', reason: 'again' });
    const counts = await alertUnclaimedJobs(db.sql, { now: min(33) });
    expect(counts.resolved).toBe(1);
    expect(await open()).toEqual(['keys_fair', 'keys_fair:frozen', 'keys_rated']);
  });
});
