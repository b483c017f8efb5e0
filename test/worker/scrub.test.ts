import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { storeTalosMachineConfigs } from '../../functions/platform/provisioning/talos.ts';
import { generateEncryptionKey, parseKeyRing } from '../../functions/lib/secrets.ts';
import { seedService } from '../support/tenancy.ts';
import { createWorkerHarness, testEnv, TOKENS, type WorkerHarness } from './support.ts';

/**
 * Secrets are scrubbed before anything is stored, not on the way out. The sandbox providers echo
 * the token they were called with (DigitalOcean in an error message for region ech4/ech5, Depot
 * in a build's log line and error): the canary token must then be absent from every table
 * (worker.jobs, job_events, alerts, the platform tables), every log line, the build log archive
 * and every answer — while the scrubber is no oracle: a payload holding a secret's exact value
 * comes back exactly as sent, like a near miss.
 */
const tail = () => crypto.randomUUID().replace(/-/g, '');
const DO_CANARY = `dop_v1_canary_${tail()}`;
const DEPOT_CANARY = `depot_canary_${tail()}`;
const CANARIES = [DO_CANARY, DEPOT_CANARY];
const sandbox = testEnv.TEST_SANDBOX_URL;
const keys = `k1:${generateEncryptionKey()}`;
const TICK = '* * * * *';
const MIN_TOKEN_LENGTH = 32;
type Json = Record<string, any>;

let h: WorkerHarness;
const outputs: Array<{ where: string; text: string }> = [];
const jobs = {} as Record<'db422' | 'db503' | 'cluster' | 'build' | 'buildFail', string>;

async function answer(where: string, path: string, init: Parameters<WorkerHarness['request']>[1] = {}) {
  const res = await h.request(path, init);
  const text = await res.text();
  outputs.push({ where, text: `${res.status} ${[...res.headers].map(([k, v]) => `${k}: ${v}`).join('\n')}\n${text}` });
  return { status: res.status, headers: res.headers, text };
}

async function created(path: string, json: Json): Promise<string> {
  const res = await answer(`POST ${path}`, path, { method: 'POST', token: 'enqueue', json });
  expect(res.status, res.text).toBe(201);
  return (JSON.parse(res.text) as Json).job.id as string;
}

beforeAll(async () => {
  h = await createWorkerHarness({
    DIGITALOCEAN_API_URL: sandbox,
    DIGITALOCEAN_TOKEN: DO_CANARY,
    DEPOT_API_URL: sandbox,
    DEPOT_TOKEN: DEPOT_CANARY,
    DEPOT_PROJECT_ID: 'scrub',
    BUILD_POLL_INTERVAL_MS: '0',
    ENCRYPTION_KEYS: keys,
    TALOS_IMAGE: 'talos-sandbox',
    KUBERNETES_VERSION_URL: `${sandbox}/kube/{endpoint}/version`,
    PROVISION_POLL_INTERVAL_MS: '0',
    LOG_STEPS: 'true',
    TICK_BUDGET_MS: '1500',
    KICK_BUDGET_MS: '0',
  } as never);
  for (const method of ['log', 'error', 'warn', 'info'] as const) {
    vi.spyOn(console, method).mockImplementation((...args: unknown[]) => void outputs.push({ where: `console.${method}`, text: args.map(String).join(' ') }));
  }
  const yaml = (type: string) => `version: v1alpha1\nmachine:\n  type: ${type}\n  token: wtoken-${type}\ncluster:\n  clusterName: t\n`;
  await storeTalosMachineConfigs(h.sql, { controlplane: yaml('controlplane'), worker: yaml('worker') }, await parseKeyRing(keys));
  const account = `acct-scrub-${tail().slice(0, 8)}`;
  const [svcDb, svcRetry, svcBuild, svcFail] = ['db', 'retry', 'build', 'fail'].map((s) => `svc-scrub-${s}-${tail().slice(0, 8)}`) as [string, string, string, string];
  for (const svc of [svcDb, svcRetry, svcBuild, svcFail]) await seedService(h.sql, svc, account);
  const script = (serviceId: string, outcome: string) =>
    fetch(`${sandbox}/_sandbox/depot/script`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ serviceId, outcome, polls: 0, lines: 3, echoAuthorization: true }) });
  await script(svcBuild, 'succeed');
  await script(svcFail, 'fail');

  // 422 quoting the token: fails at once (last_error, the failed event, the poison alert)
  jobs.db422 = await created('/v1/databases', { accountId: account, serviceId: svcDb, name: 'main', size: 'db-s-1vcpu-1gb', region: 'ech4' });
  // 503 quoting the token: retried by the step, the provider's error kept in the checkpoint
  jobs.db503 = await created('/v1/databases', { accountId: account, serviceId: svcRetry, name: 'main', size: 'db-s-1vcpu-1gb', region: 'ech5' });
  // droplets: the cluster's create step
  jobs.cluster = await created('/v1/clusters', { accountId: account, name: `c-${tail().slice(0, 8)}`, region: 'ech4', controlPlanes: 1, workers: 0, size: 's-2vcpu-4gb' });
  // builds whose output prints the token: a log line (archived, relayed) and a build error
  jobs.build = await created('/v1/pushes', { accountId: account, serviceId: svcBuild, branch: 'main', commitSha: 'abc1234' });
  jobs.buildFail = await created('/v1/pushes', { accountId: account, serviceId: svcFail, branch: 'main', commitSha: 'abc1234' });
  await h.sql`update worker.jobs set run_at = now() where status = 'queued'`;
  await h.trigger(TICK);
  await h.sql`update worker.jobs set run_at = now() where status = 'queued' and run_at < 'infinity'`;
  await h.trigger(TICK);

  for (const [name, id] of Object.entries(jobs)) {
    await answer(`GET /v1/jobs/:id (${name})`, `/v1/jobs/${id}`, { token: 'enqueue' });
  }
  await answer('GET /v1/jobs', '/v1/jobs?limit=100', { token: 'enqueue' });
  await answer('GET /v1/builds/:id/logs', `/v1/builds/${jobs.build}/logs`, { token: 'enqueue' });
  await answer('GET /v1/builds/:id/logs (failed)', `/v1/builds/${jobs.buildFail}/logs`, { token: 'enqueue' });
  await answer('GET /metrics', '/metrics', { token: 'metrics' });
  const login = await h.request('/dashboard/login', {
    method: 'POST', token: null, headers: { 'content-type': 'application/x-www-form-urlencoded', origin: 'http://worker.test' },
    body: new URLSearchParams({ token: TOKENS.admin, next: '/' }).toString(),
  });
  const session = /__Host-starbase_session=([^;]+)/.exec(login.headers.get('set-cookie') ?? '')?.[1];
  if (session) {
    const cookie = { cookie: `__Host-starbase_session=${session}` };
    await answer('GET / (dashboard)', '/', { token: null, headers: cookie });
    for (const [name, id] of Object.entries(jobs)) await answer(`dashboard job (${name})`, `/dashboard/jobs/${id}`, { token: null, headers: cookie });
  }
});

afterAll(() => {
  vi.restoreAllMocks();
});

/** Every row of the tables that hold text the system produced, as JSON. */
async function everyTable(): Promise<Record<string, string>> {
  const tables = ['worker.jobs', 'worker.job_events', 'worker.alerts', 'platform.services', 'platform.databases', 'platform.clusters', 'platform.cleanup_actions'];
  const out: Record<string, string> = {};
  for (const table of tables) {
    const [row] = await h.sql.unsafe(`select coalesce(string_agg(to_jsonb(t)::text, E'\\n'), '') as text from ${table} t`);
    out[table] = row!.text as string;
  }
  return out;
}

describe('a provider that echoes the token it was given', () => {
  it('reached every path: the echoes were stored and shown scrubbed, not missed', async () => {
    const [db422] = await h.sql`select status, last_error from worker.jobs where id = ${jobs.db422}`;
    expect(db422).toMatchObject({ status: 'failed' });
    expect(db422!.last_error).toContain('request with authorization "Bearer [redacted]" refused');
    const [db503] = await h.sql`select checkpoint from worker.jobs where id = ${jobs.db503}`;
    expect(db503!.checkpoint.providerRetry.error).toContain('"Bearer [redacted]"');
    const [cluster] = await h.sql`select last_error from worker.jobs where id = ${jobs.cluster}`;
    expect(cluster!.last_error).toContain('"Bearer [redacted]"');
    const [failed] = await h.sql`select status, last_error from worker.jobs where id = ${jobs.buildFail}`;
    expect(failed).toMatchObject({ status: 'failed' });
    expect(failed!.last_error).toContain('(authorization: Bearer [redacted])');
    const [alert] = await h.sql`select message from worker.alerts where job_id = ${jobs.db422}`;
    expect(alert!.message).toContain('"Bearer [redacted]"');
    const [built] = await h.sql`select status from worker.jobs where id = ${jobs.build}`;
    expect(built!.status).toBe('done');
    const log = outputs.find((o) => o.where === 'GET /v1/builds/:id/logs')!.text;
    expect(log).toContain('+ curl -H "authorization: Bearer [redacted]"');
  });

  it('the canary is in no table: jobs, events, alerts, platform', async () => {
    const tables = await everyTable();
    for (const [table, text] of Object.entries(tables)) {
      for (const canary of CANARIES) expect(text.includes(canary), `${table} holds a canary`).toBe(false);
    }
  });

  it('the canary is in no answer (API, build log, metrics, dashboard) and no log line', () => {
    expect(outputs.some((o) => o.where.startsWith('dashboard job'))).toBe(true);
    for (const canary of CANARIES) expect(outputs.filter((o) => o.text.includes(canary)).map((o) => o.where)).toEqual([]);
  });

  it('the canary is in no archived build log (R2)', async () => {
    const bucket = (h.env as unknown as { BUILD_LOGS: R2Bucket }).BUILD_LOGS;
    for (const id of [jobs.build, jobs.buildFail]) {
      const object = await bucket.get(`builds/${id}.log`);
      const text = await object!.text();
      expect(text).toContain('[redacted]');
      for (const canary of CANARIES) expect(text.includes(canary)).toBe(false);
    }
  });
});

describe('the scrubber is no oracle', () => {
  it('a payload holding a secret\'s exact value comes back as sent, like a near miss', async () => {
    const exact = TOKENS.enqueue;
    const near = `${exact.slice(0, -1)}${exact.endsWith('x') ? 'y' : 'x'}`;
    for (const guess of [exact, near]) {
      const payload = { text: guess, nested: { note: `is it ${guess}?` } };
      const res = await h.request('/v1/jobs', { method: 'POST', token: 'enqueue', json: { type: 'uppercase', payload } });
      expect(res.status).toBe(201);
      const { job } = (await res.json()) as Json;
      expect(job.payload).toEqual(payload);
      const read = (await (await h.request(`/v1/jobs/${job.id}`, { token: 'enqueue' })).json()) as Json;
      expect(read.job.payload).toEqual(payload);
      expect(read.events.find((e: Json) => e.kind === 'enqueued')?.detail?.payload ?? payload).toEqual(payload);
      const listed = (await (await h.request('/v1/jobs?type=uppercase&limit=100', { token: 'enqueue' })).json()) as Json;
      expect(listed.jobs.find((j: Json) => j.id === job.id).payload).toEqual(payload);
    }
  });
});

describe('configured tokens', () => {
  it(`a bearer token shorter than ${MIN_TOKEN_LENGTH} characters is refused at startup, naming it, never showing it`, async () => {
    // exactly 32 is enough (the test config's tokens are 37); unset narrower tokens are fine
    const exact = await createWorkerHarness({ ADMIN_TOKEN: 'a'.repeat(MIN_TOKEN_LENGTH), ENQUEUE_TOKEN: undefined, METRICS_TOKEN: undefined } as never);
    expect((await exact.request('/v1/jobs', { token: null, headers: { authorization: `Bearer ${'a'.repeat(MIN_TOKEN_LENGTH)}` } })).status).toBe(200);
    for (const name of ['ADMIN_TOKEN', 'ENQUEUE_TOKEN', 'METRICS_TOKEN'] as const) {
      const short = `short-${name.toLowerCase()}-${'y'.repeat(MIN_TOKEN_LENGTH - 8 - name.length)}`;
      expect(short.length).toBe(MIN_TOKEN_LENGTH - 1);
      const weak = await createWorkerHarness({ [name]: short } as never);
      // refused with its own token and with any other: the deployment does not run
      for (const presented of [short, TOKENS.admin]) {
        const res = await weak.request('/v1/jobs', { token: null, headers: { authorization: `Bearer ${presented}` } });
        expect(res.status).toBe(503);
        const text = await res.text();
        expect(JSON.parse(text).error).toMatchObject({ code: 'not_configured' });
        expect(text).toContain(`${name} is shorter than ${MIN_TOKEN_LENGTH} characters`);
        expect(text).not.toContain(short);
      }
      await expect(weak.trigger(TICK)).rejects.toThrow(`${name} is shorter than ${MIN_TOKEN_LENGTH} characters`);
    }
  });
});
