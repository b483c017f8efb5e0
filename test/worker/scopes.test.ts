import { beforeAll, describe, expect, it } from 'vitest';
import { claimJobs } from '../../queue/index.ts';
import { createRegistry } from '../../functions/platform/compose.ts';
import { createWorkerHarness, type WorkerHarness } from './support.ts';

/**
 * Issue 14, item 1: what the enqueue token may enqueue over the generic routes. A scope × job-type
 * matrix over the app's own registry (every registered type × {enqueue, admin} × {single, batch}):
 * the enqueue token gets the public types and a 403 naming any other, writing nothing (a batch
 * with one refused element included); the admin token, the operators' escape hatch, gets every
 * type. And the provisioning limit per account holds when a caller names its own concurrency key.
 */

let h: WorkerHarness;
type Json = Record<string, any>;
let registered: string[] = [];

beforeAll(async () => {
  h = await createWorkerHarness();
  registered = (await createRegistry(h.env, h.sql)).list().map((t) => t.type).sort();
});

/** Who may enqueue each type over POST /v1/jobs with the enqueue token: every registered type must be listed. */
const EXPECTED: Record<string, 'public' | RegExp> = {
  uppercase: 'public',
  countdown: 'public',
  fail: 'public',
  await_signal: 'public',
  build: /^job type build is internal: enqueue it through POST \/v1\/pushes/,
  provision_db: /^job type provision_db is internal: enqueue it through POST \/v1\/databases/,
  provision_cluster: /^job type provision_cluster is internal: enqueue it through POST \/v1\/clusters/,
  billing_cron: /^job type billing_cron is internal: enqueue it through its monthly schedule/,
  invoice_account: /^job type invoice_account is internal: enqueue it through billing_cron/,
  cleanup: /^job type cleanup is internal: enqueue it through its schedule/,
};

/** A payload each type accepts (the matrix must reach the access check, not a 400). */
const PAYLOADS: Record<string, Json> = {
  uppercase: { text: 'hi' },
  countdown: { n: 1 },
  fail: {},
  await_signal: { name: 'scopes-smoke', timeoutMs: 60_000 },
  build: { accountId: 'acct-scopes', serviceId: 'svc-scopes', branch: 'main', commitSha: 'abc1234' },
  provision_db: { accountId: 'acct-scopes', serviceId: 'svc-scopes', name: 'main', size: 'db-s-1vcpu-1gb', region: 'fra1' },
  provision_cluster: { accountId: 'acct-scopes', name: 'prod', region: 'fra1', controlPlanes: 1, workers: 1, size: 's-2vcpu-4gb' },
  billing_cron: { period: '2026-03' },
  invoice_account: { accountId: 'acct-scopes', period: '2026-03' },
  cleanup: {},
};

/** Never due while the test runs: the kick after an accepted enqueue runs nothing. */
const RUN_AT = '2999-01-01T00:00:00Z';

async function snapshot() {
  const [row] = await h.sql`
    select (select count(*)::int from worker.jobs) as jobs, (select count(*)::int from worker.job_history) as events,
           (select count(*)::int from worker.concurrency_keys) as concurrency_keys`;
  return row;
}

const job = (type: string) => ({ type, payload: PAYLOADS[type], runAt: RUN_AT });

describe('the scope × job-type matrix', () => {
  it('lists every type of the registry', () => {
    expect(registered.length).toBeGreaterThan(3);
    expect(Object.keys(EXPECTED).sort()).toEqual(registered);
    expect(Object.keys(PAYLOADS).sort()).toEqual(registered);
  });

  for (const token of ['enqueue', 'admin'] as const) {
    for (const shape of ['single', 'batch'] as const) {
      it(`${token} token, ${shape === 'single' ? 'POST /v1/jobs' : 'POST /v1/jobs/batch (after a public job)'}: 201 for what it may enqueue, 403 naming the type and nothing written for the rest`, async () => {
        const outcomes: Record<string, string> = {};
        for (const type of registered) {
          await h.sql`delete from worker.jobs`;
          const before = await snapshot();
          const res = shape === 'single'
            ? await h.request('/v1/jobs', { method: 'POST', token, json: job(type) })
            : await h.request('/v1/jobs/batch', { method: 'POST', token, json: { jobs: [job('uppercase'), job(type)] } });
          const body = (await res.json()) as Json;
          const allowed = token === 'admin' || EXPECTED[type] === 'public';
          if (allowed) {
            expect(res.status, `${type}: ${JSON.stringify(body)}`).toBe(201);
            const types = shape === 'single' ? [body.job.type] : body.jobs.map((j: Json) => j.type);
            expect(types).toEqual(shape === 'single' ? [type] : ['uppercase', type]);
            outcomes[type] = '201';
          } else {
            expect(res.status, `${type}: ${JSON.stringify(body)}`).toBe(403);
            expect(body.error.code).toBe('forbidden');
            expect(body.error.message).toMatch(EXPECTED[type] as RegExp);
            expect(body.error.field).toBe(shape === 'single' ? 'type' : 'jobs[1].type');
            expect(await snapshot()).toEqual(before);
            outcomes[type] = '403';
          }
        }
        const expected = Object.fromEntries(registered.map((t) => [t, token === 'admin' || EXPECTED[t] === 'public' ? '201' : '403']));
        expect(outcomes).toEqual(expected);
        await h.sql`delete from worker.jobs`;
      });
    }
  }

  it('a batch refuses at the first internal element, whichever place it has', async () => {
    const before = await snapshot();
    const res = await h.request('/v1/jobs/batch', { method: 'POST', token: 'enqueue', json: { jobs: [job('uppercase'), job('countdown'), job('cleanup'), job('billing_cron')] } });
    expect(res.status).toBe(403);
    expect(((await res.json()) as Json).error).toMatchObject({ field: 'jobs[2].type', message: expect.stringMatching(/^job type cleanup is internal/) });
    expect(await snapshot()).toEqual(before);
  });

  it('an unknown type is still a 400 naming type, for either token', async () => {
    for (const token of ['enqueue', 'admin'] as const) {
      const res = await h.request('/v1/jobs', { method: 'POST', token, json: { type: 'no_such_type', payload: {} } });
      expect(res.status).toBe(400);
      expect(((await res.json()) as Json).error.field).toBe('type');
    }
  });
});

describe("the provisioning limit per account cannot be sidestepped with the caller's own concurrency key", () => {
  it('over HTTP: a provision_db with its own key is a 400 naming concurrencyKey; without one it gets the account key, and at most 2 run', async () => {
    const before = await snapshot();
    for (const extra of [{ concurrencyKey: 'mine', concurrencyLimit: 100 }, { concurrencyKey: 'provision:acct-scopes', concurrencyLimit: 100 }]) {
      const single = await h.request('/v1/jobs', { method: 'POST', token: 'admin', json: { ...job('provision_db'), ...extra } });
      expect(single.status).toBe(400);
      expect(((await single.json()) as Json).error).toMatchObject({ field: 'concurrencyKey', message: expect.stringMatching(/job type "provision_db" sets its own concurrency key/) });
      const batch = await h.request('/v1/jobs/batch', { method: 'POST', token: 'admin', json: { jobs: [job('uppercase'), { ...job('provision_db'), ...extra }] } });
      expect(batch.status).toBe(400);
      expect(((await batch.json()) as Json).error.field).toBe('jobs[1].concurrencyKey');
    }
    // and a public job cannot take the account's key (it would hold one of its two slots)
    const squat = await h.request('/v1/jobs', { method: 'POST', token: 'enqueue', json: { ...job('countdown'), concurrencyKey: 'provision:acct-scopes', concurrencyLimit: 100 } });
    expect(squat.status).toBe(400);
    expect(((await squat.json()) as Json).error).toMatchObject({ field: 'concurrencyKey', message: expect.stringMatching(/reserved for job type\(s\) provision_cluster, provision_db/) });
    expect(await snapshot()).toEqual(before);

    const names = ['one', 'two', 'three', 'four'];
    for (const name of names) {
      const res = await h.request('/v1/jobs', { method: 'POST', token: 'admin', json: { ...job('provision_db'), payload: { ...PAYLOADS.provision_db, name } } });
      expect(res.status).toBe(201);
      expect(((await res.json()) as Json).job.concurrencyKey).toBe('provision:acct-scopes');
    }
    const claimed = await claimJobs(h.sql, { workerId: 'scopes-test', limit: 10, now: new Date('2999-01-01T00:00:01Z') });
    expect(claimed.map((j) => j.type)).toEqual(['provision_db', 'provision_db']);
    await h.sql`delete from worker.jobs`;
  });
});
