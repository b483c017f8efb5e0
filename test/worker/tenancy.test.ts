import { beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { storeTalosMachineConfigs } from '../../functions/platform/provisioning/talos.ts';
import { clusterTag, databaseTag } from '../../functions/platform/provisioning/resources.ts';
import { generateEncryptionKey, parseKeyRing } from '../../functions/lib/secrets.ts';
import { seedAccount, seedService } from '../support/tenancy.ts';
import { createWorkerHarness, testEnv, type WorkerHarness } from './support.ts';

/**
 * Requests are bound to their account: every route that takes an account or a service refuses an
 * unknown account or service (404) and another account's service (403), writing nothing, and the
 * job types' own steps refuse the same payloads whatever path enqueued them (POST /v1/jobs, SQL),
 * before any cloud resource is made.
 */
let h: WorkerHarness;
const sandbox = testEnv.TEST_SANDBOX_URL;
const keys = `k1:${generateEncryptionKey()}`;
type Json = Record<string, any>;
const uid = () => crypto.randomUUID().slice(0, 8);

const A = `acct-a-${uid()}`;
const B = `acct-b-${uid()}`;
const SVC_A = `svc-a-${uid()}`;
const SVC_OWNERLESS = `svc-none-${uid()}`;

beforeAll(async () => {
  h = await createWorkerHarness({
    DIGITALOCEAN_API_URL: sandbox,
    DIGITALOCEAN_TOKEN: 'sandbox-do-token',
    ENCRYPTION_KEYS: keys,
    TALOS_IMAGE: 'talos-sandbox',
    KUBERNETES_VERSION_URL: `${sandbox}/kube/{endpoint}/version`,
    PROVISION_POLL_INTERVAL_MS: '0',
    KICK_BUDGET_MS: '3000',
  } as never);
  const yaml = (type: string) => `version: v1alpha1\nmachine:\n  type: ${type}\n  token: wtoken-${type}\ncluster:\n  clusterName: t\n`;
  await storeTalosMachineConfigs(h.sql, { controlplane: yaml('controlplane'), worker: yaml('worker') }, await parseKeyRing(keys));
  await seedService(h.sql, SVC_A, A);
  await seedAccount(h.sql, B);
  // a row from before services were bound to accounts: it belongs to nobody
  await h.sql`insert into platform.services (id, account_id) values (${SVC_OWNERLESS}, null)`;
});

/** Everything a refused request could have written. */
async function snapshot() {
  const [row] = await h.sql`
    select (select count(*)::int from worker.jobs) as jobs, (select count(*)::int from worker.job_history) as events,
           (select coalesce(string_agg(id || ':' || coalesce(account_id, '') || ':' || desired_state::text, ',' order by id), '') from platform.services) as services,
           (select count(*)::int from platform.databases) as databases, (select count(*)::int from platform.clusters) as clusters,
           (select count(*)::int from platform.accounts) as accounts`;
  return row;
}

async function sandboxState(): Promise<{ databases: Json[]; droplets: Json[] }> {
  return (await (await fetch(`${sandbox}/_sandbox/digitalocean/state`)).json()) as { databases: Json[]; droplets: Json[] };
}

const push = (accountId: string, serviceId: string) => ({ accountId, serviceId, branch: 'main', commitSha: 'abc1234' });
const database = (accountId: string, serviceId: string) => ({ accountId, serviceId, name: 'main', size: 'db-s-1vcpu-1gb', region: 'fra1' });
const cluster = (accountId: string) => ({ accountId, name: `c-${uid()}`, region: 'fra1', controlPlanes: 1, workers: 0, size: 's-2vcpu-4gb' });

/**
 * Every route that takes an account or a service, with the bodies that must be refused: status,
 * error code and field. The list is checked against the app's own routes below.
 */
const REFUSALS: Record<string, Array<{ what: string; body: Json; status: 403 | 404; field: string }>> = {
  'POST /v1/pushes': [
    { what: 'an unknown account', body: push('acct-nonexistent', SVC_A), status: 404, field: 'accountId' },
    { what: 'an unknown service', body: push(A, `svc-nope-${uid()}`), status: 404, field: 'serviceId' },
    { what: "another account's service", body: push(B, SVC_A), status: 403, field: 'accountId' },
    { what: 'a service with no account', body: push(A, SVC_OWNERLESS), status: 403, field: 'accountId' },
  ],
  'POST /v1/databases': [
    { what: 'an unknown account', body: database('acct-nonexistent', SVC_A), status: 404, field: 'accountId' },
    { what: 'an unknown service', body: database(A, `svc-nope-${uid()}`), status: 404, field: 'serviceId' },
    { what: "another account's service", body: database(B, SVC_A), status: 403, field: 'accountId' },
    { what: 'a service with no account', body: database(A, SVC_OWNERLESS), status: 403, field: 'accountId' },
  ],
  'POST /v1/clusters': [{ what: 'an unknown account', body: cluster('acct-nonexistent'), status: 404, field: 'accountId' }],
};
/** The other routes, and why none of them acts for an account. */
const NOT_ACCOUNT_BOUND: Record<string, string> = {
  'POST /v1/jobs': 'generic: the job types\' own steps check the payload (tested below)',
  'POST /v1/jobs/batch': 'generic: the job types\' own steps check the payload',
  'POST /v1/jobs/bulk/retry': 'admin: acts on the jobs a filter of type, status, time and fingerprint takes, not on an account',
  'POST /v1/jobs/bulk/cancel': 'admin: acts on the jobs a filter of type, status and time takes, not on an account',
  'POST /v1/clusters/:id/bootstrapped': 'admin: resumes a job whose account was checked when it was enqueued and in its first step',
  'POST /webhooks/stripe': 'Stripe names the account in a signed event',
  'POST /webhooks/depot': 'a signed event names a Depot build; it only wakes the live build job that checkpointed it',
  'POST /v1/events': 'admin: an event for the jobs waiting on a (name, key), whichever account they belong to',
  'POST /v1/pauses': 'admin: pauses a job type or a pool, for every account',
  'POST /v1/pauses/resume': 'admin: resumes a job type or a pool, for every account',
  'POST /v1/rate-limits/resume': "admin: ends a rate key's pause, for every account's jobs on the key",
};

describe('every route that takes an account or a service', () => {
  it('is listed here (read from the app, so a new route must be classified)', () => {
    const routes = createApp()
      .routes.filter((r) => r.method === 'POST' && (r.path.startsWith('/v1/') || r.path.startsWith('/webhooks/')))
      .map((r) => `${r.method} ${r.path}`)
      .filter((r, i, all) => all.indexOf(r) === i)
      // the admin job actions (cancel, retry, …) and leader/maintenance/tick act on ids or on the whole queue, not accounts
      .filter((r) => !/^POST \/v1\/(jobs\/:id\/|leader|maintenance|tick$)/.test(r));
    expect(routes.filter((r) => !(r in REFUSALS) && !(r in NOT_ACCOUNT_BOUND))).toEqual([]);
  });

  for (const [route, cases] of Object.entries(REFUSALS)) {
    for (const c of cases) {
      it(`${route}: ${c.what} → ${c.status}, nothing written, no cloud resource`, async () => {
        const [method, path] = route.split(' ') as [string, string];
        const before = await snapshot();
        const cloudBefore = await sandboxState();
        const res = await h.request(path, { method, token: 'enqueue', json: c.body });
        expect(res.status).toBe(c.status);
        expect(((await res.json()) as Json).error).toMatchObject({ code: c.status === 404 ? 'not_found' : 'forbidden', field: c.field });
        expect(await snapshot()).toEqual(before);
        // The sandbox is shared with the other test files running meanwhile: what this request
        // could have made is a resource it did not have before that names this request's
        // account, service or cluster (a database's tag names its service, a droplet its cluster).
        const cloudAfter = await sandboxState();
        const known = new Set([...cloudBefore.databases, ...cloudBefore.droplets].map((r) => r.id));
        const names = [c.body.accountId, c.body.serviceId, route === 'POST /v1/clusters' ? c.body.name : undefined].filter(Boolean) as string[];
        const made = [...cloudAfter.databases, ...cloudAfter.droplets].filter((r) => !known.has(r.id) && names.some((n) => JSON.stringify(r).includes(n)));
        expect(made).toEqual([]);
      });
    }
  }

  it('POST /v1/pushes needs the account: without it, 400 naming accountId, nothing written', async () => {
    const before = await snapshot();
    const res = await h.request('/v1/pushes', { method: 'POST', token: 'enqueue', json: { serviceId: SVC_A, branch: 'main', commitSha: 'abc1234' } });
    expect(res.status).toBe(400);
    expect(((await res.json()) as Json).error.field).toBe('accountId');
    expect(await snapshot()).toEqual(before);
  });

  it('the owner is accepted (the refusals above are not a route that refuses everyone)', async () => {
    const res = await h.request('/v1/pushes', { method: 'POST', token: 'enqueue', json: push(A, SVC_A) });
    expect(res.status).toBe(201);
    const { job } = (await res.json()) as Json;
    expect(job.payload).toEqual(push(A, SVC_A));
    await h.request(`/v1/jobs/${job.id}/cancel`, { method: 'POST', json: {} });
  });
});

describe('the job types check their own payloads, whatever path enqueued them', () => {
  it('POST /v1/jobs with a provision_db payload for another account\'s service: failed permanently, no database at the provider', async () => {
    const res = await h.request('/v1/jobs', { method: 'POST', token: 'admin', json: { type: 'provision_db', payload: database(B, SVC_A) } });
    expect(res.status).toBe(201);
    const { job } = (await res.json()) as Json;
    await h.sql`update worker.jobs set run_at = now() where id = ${job.id} and status = 'queued'`;
    await h.trigger('* * * * *');
    const [row] = await h.sql`select status, attempts, last_error from worker.jobs where id = ${job.id}`;
    expect(row).toEqual({ status: 'failed', attempts: 1, last_error: `refused: service ${SVC_A} does not belong to account ${B}` });
    expect((await sandboxState()).databases.filter((d) => d.tags.includes(databaseTag(job.id)))).toEqual([]);
    expect(await h.sql`select 1 from platform.databases where job_id = ${job.id}`).toEqual([]);
  });

  it('POST /v1/jobs with a provision_cluster payload for an unknown account: failed permanently, no droplet', async () => {
    const res = await h.request('/v1/jobs', { method: 'POST', token: 'admin', json: { type: 'provision_cluster', payload: cluster('acct-nonexistent') } });
    expect(res.status).toBe(201);
    const { job } = (await res.json()) as Json;
    await h.sql`update worker.jobs set run_at = now() where id = ${job.id} and status = 'queued'`;
    await h.trigger('* * * * *');
    const [row] = await h.sql`select status, attempts, last_error from worker.jobs where id = ${job.id}`;
    expect(row).toEqual({ status: 'failed', attempts: 1, last_error: 'refused: no account acct-nonexistent' });
    expect((await sandboxState()).droplets.filter((d) => d.tags.includes(clusterTag(job.id)))).toEqual([]);
    expect(await h.sql`select 1 from platform.clusters where id = ${job.id}`).toEqual([]);
  });

  it('a build enqueued in SQL for another account\'s service fails permanently and sets no image', async () => {
    const payload = push(B, SVC_A);
    const [{ j: job }] = (await h.sql`select j from worker.enqueue_jobs(${h.sql.json([{ type: 'build', payload }])}::jsonb) j`) as unknown as [{ j: { id: string } }];
    await h.sql`update worker.jobs set run_at = now() where id = ${job.id}`;
    await h.trigger('* * * * *');
    const [row] = await h.sql`select status, attempts, last_error from worker.jobs where id = ${job.id}`;
    expect(row).toEqual({ status: 'failed', attempts: 1, last_error: `build refused: service ${SVC_A} does not belong to account ${B}` });
    const [service] = await h.sql`select desired_state from platform.services where id = ${SVC_A}`;
    expect(service!.desired_state).toEqual({});
  });
});
