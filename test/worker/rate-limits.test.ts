import { beforeAll, describe, expect, it } from 'vitest';
import { createWorkerHarness, type WorkerHarness } from './support.ts';

/**
 * Rate keys over HTTP: GET /v1/rate-limits and POST /v1/rate-limits/resume (listRateLimits and
 * worker.resume_rate_key, as the CLI), and POST /v1/jobs naming its own rateLimit and fairnessKey.
 */
let h: WorkerHarness;
type Json = Record<string, any>;
const json = async (res: Response): Promise<Json> => (await res.json()) as Json;
const jobCount = async () => (await h.sql`select count(*)::int as n from worker.jobs`)[0]!.n as number;

beforeAll(async () => {
  h = await createWorkerHarness();
});

describe('GET /v1/rate-limits, POST /v1/rate-limits/resume', () => {
  it("lists a key a 429 paused, resumes it (its job due now, with a resumed event), and refuses it twice", async () => {
    const rateLimit = { key: 'http:provider', limit: 5, per: '1m' };
    const created = await h.request('/v1/jobs', { method: 'POST', token: 'enqueue', json: { type: 'countdown', payload: { n: 1 }, rateLimit, runAt: '2100-01-01T00:00:00Z' } });
    expect(created.status).toBe(201);
    const { job } = await json(created);
    // its step met a provider's 429: the key is paused for an hour and the job queued for then
    await h.sql`update worker.jobs set run_at = now() where id = ${job.id}`;
    const [claimed] = await h.sql`select * from worker.claim_jobs('rate-test', null, 10, null, array['countdown'])`;
    expect(claimed!.id).toBe(job.id);
    await h.sql`select worker.settle_rate_limited(${job.id}::uuid, ${claimed!.lease_token}::uuid, 3600000, 'provider answered 429')`;

    const listed = await json(await h.request('/v1/rate-limits', { token: 'metrics' }));
    const state = listed.rateLimits.find((r: Json) => r.key === 'http:provider');
    expect(state).toMatchObject({ limit: 5, perMs: 60_000, startedInWindow: 1, pauseReason: 'provider answered 429', queued: 1 });
    expect(new Date(state.pausedUntil).getTime()).toBeGreaterThan(Date.now() + 3_500_000);
    expect((await h.request('/v1/rate-limits', { token: 'enqueue' })).status).toBe(403);

    const forbidden = await h.request('/v1/rate-limits/resume', { method: 'POST', token: 'metrics', json: { key: 'http:provider' } });
    expect(forbidden.status).toBe(403);
    const resumed = await h.request('/v1/rate-limits/resume', { method: 'POST', json: { key: 'http:provider', resumedBy: 'alice' } });
    expect(resumed.status).toBe(200);
    expect((await json(resumed)).resumed).toMatchObject({ key: 'http:provider', pauseReason: 'provider answered 429', jobsDue: 1 });
    const [row] = await h.sql`select run_at <= now() as due from worker.jobs where id = ${job.id}`;
    expect(row!.due).toBe(true);
    const events = (await json(await h.request(`/v1/jobs/${job.id}`))).events as Json[];
    expect(events.at(-1)).toMatchObject({ kind: 'resumed', detail: { rateKey: 'http:provider', by: 'alice' } });

    const again = await h.request('/v1/rate-limits/resume', { method: 'POST', json: { key: 'http:provider' } });
    expect(again.status).toBe(409);
    expect((await json(again)).error.field).toBe('key');
    expect((await h.request('/v1/rate-limits/resume', { method: 'POST', json: { key: 'http:nope' } })).status).toBe(404);
    const bad = await h.request('/v1/rate-limits/resume', { method: 'POST', json: { key: 'http:provider', until: 'now' } });
    expect(bad.status).toBe(400);
  });
});

describe('POST /v1/jobs with its own rate limit and fairness key', () => {
  it('takes them; a key with another limit is a 409 naming rateLimit, a bad window a 400 naming rateLimit.per; nothing written', async () => {
    const ok = await h.request('/v1/jobs', { method: 'POST', token: 'enqueue', json: { type: 'uppercase', payload: { text: 'x' }, rateLimit: { key: 'http:own', limit: 2, per: 10_000 }, fairnessKey: 'tenant:1' } });
    expect(ok.status).toBe(201);
    const [row] = await h.sql`select rate_key, fair_key from worker.jobs where id = ${(await json(ok)).job.id}`;
    expect(row).toEqual({ rate_key: 'http:own', fair_key: 'tenant:1' });

    const before = await jobCount();
    const conflict = await h.request('/v1/jobs', { method: 'POST', token: 'enqueue', json: { type: 'uppercase', payload: { text: 'x' }, rateLimit: { key: 'http:own', limit: 3, per: 10_000 } } });
    expect(conflict.status).toBe(409);
    expect((await json(conflict)).error).toMatchObject({ field: 'rateLimit', message: expect.stringMatching(/rate key "http:own" is limited to 2 per 10000 ms/) });
    const window = await h.request('/v1/jobs', { method: 'POST', token: 'enqueue', json: { type: 'uppercase', payload: { text: 'x' }, rateLimit: { key: 'http:w', limit: 3, per: '2w' } } });
    expect(window.status).toBe(400);
    expect((await json(window)).error.field).toBe('rateLimit.per');
    const batch = await h.request('/v1/jobs/batch', { method: 'POST', token: 'enqueue', json: { jobs: [
      { type: 'uppercase', payload: { text: 'a' } }, { type: 'uppercase', payload: { text: 'b' }, rateLimit: { key: 'http:own', limit: 9, per: 10_000 } }] } });
    expect(batch.status).toBe(409);
    for (const extra of [{ rateLimit: { key: 'k', limit: 1, per: '1m', burst: 1 } }, { rateLimit: { key: 'k', limit: 0, per: '1m' } }, { fairnessKey: '' }]) {
      const res = await h.request('/v1/jobs', { method: 'POST', token: 'enqueue', json: { type: 'uppercase', payload: { text: 'x' }, ...extra } });
      expect(res.status, JSON.stringify(extra)).toBe(400);
    }
    expect(await jobCount()).toBe(before);
    expect(await h.sql`select key from worker.rate_limits where key in ('http:w', 'k')`).toEqual([]);
  });

  it("without the admin token, an enqueue cannot take a job off its type's rate key, nor spend a key a type declares", async () => {
    // a type that guards a provider's budget with its own key
    await h.sql`insert into worker.rate_limits (key, max_starts, per_ms) values ('http:declared', 10, 60000) on conflict do nothing`;
    await h.sql`update worker.job_types set rate_key = 'http:declared' where type = 'countdown'`;
    try {
      const before = await jobCount();
      const off = await h.request('/v1/jobs', { method: 'POST', token: 'enqueue', json: { type: 'countdown', payload: { n: 1 }, rateLimit: { key: 'http:mine', limit: 100000, per: '1s' } } });
      expect(off.status).toBe(403);
      expect((await json(off)).error).toMatchObject({ field: 'rateLimit', message: expect.stringMatching(/job type countdown has its own rate limit/) });
      const squat = await h.request('/v1/jobs/batch', { method: 'POST', token: 'enqueue', json: { jobs: [
        { type: 'uppercase', payload: { text: 'a' } }, { type: 'uppercase', payload: { text: 'b' }, rateLimit: { key: 'http:declared', limit: 10, per: 60_000 } }] } });
      expect(squat.status).toBe(403);
      expect((await json(squat)).error).toMatchObject({ field: 'jobs[1].rateLimit', message: expect.stringMatching(/rate key http:declared belongs to job type\(s\) countdown/) });
      expect(await jobCount()).toBe(before);
      const admin = await h.request('/v1/jobs', { method: 'POST', token: 'admin', json: { type: 'countdown', payload: { n: 1 }, rateLimit: { key: 'http:mine', limit: 1000, per: '1s' } } });
      expect(admin.status).toBe(201);
    } finally {
      await h.sql`update worker.job_types set rate_key = null where type = 'countdown'`;
    }
  });

  it("without the admin token, an enqueue cannot take a job off its type's fairness key", async () => {
    await h.sql`update worker.job_types set fair_key = 'account:{n}' where type = 'countdown'`;
    try {
      const before = await jobCount();
      const off = await h.request('/v1/jobs/batch', { method: 'POST', token: 'enqueue', json: { jobs: [{ type: 'countdown', payload: { n: 1 }, fairnessKey: 'mine' }] } });
      expect(off.status).toBe(403);
      expect((await json(off)).error).toMatchObject({ field: 'jobs[0].fairnessKey', message: expect.stringMatching(/job type countdown has its own fairness key \(account:\{n\}\)/) });
      expect(await jobCount()).toBe(before);
      const plain = await h.request('/v1/jobs', { method: 'POST', token: 'enqueue', json: { type: 'countdown', payload: { n: 1 } } });
      expect((await h.sql`select fair_key from worker.jobs where id = ${(await json(plain)).job.id}`)[0]!.fair_key).toBe('account:1');
      const admin = await h.request('/v1/jobs', { method: 'POST', token: 'admin', json: { type: 'countdown', payload: { n: 1 }, fairnessKey: 'mine' } });
      expect(admin.status).toBe(201);
    } finally {
      await h.sql`update worker.job_types set fair_key = null where type = 'countdown'`;
    }
  });
});
