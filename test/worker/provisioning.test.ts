import { seedAccount, seedService } from '../support/tenancy.ts';
import { beforeAll, describe, expect, it } from 'vitest';
import { storeTalosMachineConfigs } from '../../functions/platform/provisioning/talos.ts';
import { decryptSecret, generateEncryptionKey, parseKeyRing } from '../../functions/lib/secrets.ts';
import { databaseSecretContext } from '../../functions/platform/provisioning/provision-db.ts';
import { countJobs, createWorkerHarness, testEnv, type WorkerHarness } from './support.ts';

let h: WorkerHarness;
const sandbox = testEnv.TEST_SANDBOX_URL;
const keys = `k1:${generateEncryptionKey()}`;
type Json = Record<string, any>;
const TICK = '* * * * *';

beforeAll(async () => {
  h = await createWorkerHarness({
    DIGITALOCEAN_API_URL: sandbox,
    DIGITALOCEAN_TOKEN: 'sandbox-do-token',
    ENCRYPTION_KEYS: keys,
    TALOS_IMAGE: 'talos-sandbox',
    KUBERNETES_VERSION_URL: `${sandbox}/kube/{endpoint}/version`,
    PROVISION_POLL_INTERVAL_MS: '0',
    TICK_BUDGET_MS: '5000',
    KICK_BUDGET_MS: '5000',
  } as never);
  const yaml = (type: string) => `version: v1alpha1\nmachine:\n  type: ${type}\n  token: wtoken-${type}\ncluster:\n  clusterName: t\n`;
  await storeTalosMachineConfigs(h.sql, { controlplane: yaml('controlplane'), worker: yaml('worker') }, await parseKeyRing(keys));
});

const uid = () => crypto.randomUUID().slice(0, 8);
async function json(res: Response): Promise<Json> {
  return (await res.json()) as Json;
}

describe('POST /v1/databases', () => {
  it('provisions a database through every step; the connection string is stored sealed and shown nowhere', async () => {
    const svc = `svc-${uid()}`;
    await seedService(h.sql, svc, 'acct-1');
    const res = await h.request('/v1/databases', { method: 'POST', token: 'enqueue', json: { accountId: 'acct-1', serviceId: svc, name: 'main', size: 'db-s-1vcpu-1gb', region: 'fra1' } });
    expect(res.status).toBe(201);
    const { job } = await json(res);
    await h.trigger(TICK);
    const got = await json(await h.request(`/v1/jobs/${job.id}`));
    expect(got.job.status).toBe('done');
    const steps = got.events.filter((e: Json) => e.kind === 'claimed').map((e: Json) => e.detail.step);
    expect(steps[0]).toBe('start');
    expect(new Set(steps)).toEqual(new Set(['start', 'wait_online', 'pool']));
    const [service] = await h.sql`select desired_state from platform.services where id = ${svc}`;
    const sealed = service!.desired_state.databases.main;
    const plain = await decryptSecret(sealed, await parseKeyRing(keys), { context: databaseSecretContext(svc, 'main') });
    expect(plain).toMatch(/^postgres(ql)?:\/\//);
    expect(JSON.stringify(got)).not.toContain(plain);
    const dump = await h.sql`select payload::text || checkpoint::text || coalesce(result::text, '') as t from worker.jobs
                              union all select detail::text from worker.job_history`;
    expect(dump.some((r) => (r.t as string).includes(plain))).toBe(false);
  });

  it('refuses an unknown service (404) and a bad body (400), writing nothing', async () => {
    const before = await countJobs(h.sql);
    await seedAccount(h.sql, 'acct-1');
    const unknown = await h.request('/v1/databases', { method: 'POST', json: { accountId: 'acct-1', serviceId: 'nope', name: 'main', size: 'db-s-1vcpu-1gb', region: 'fra1' } });
    expect(unknown.status).toBe(404);
    expect((await json(unknown)).error.field).toBe('serviceId');
    const bad = await h.request('/v1/databases', { method: 'POST', json: { accountId: 'a', serviceId: 'x', name: 'main', size: 'db-s-1vcpu-1gb' } });
    expect(bad.status).toBe(400);
    expect((await json(bad)).error.field).toBe('region');
    expect(await countJobs(h.sql)).toBe(before);
  });
});

describe('POST /v1/clusters', () => {
  it('provisions droplets, parks at awaiting_bootstrap with the talosctl command, resumes on /bootstrapped, registers the cluster active', async () => {
    const name = `c-${uid()}`;
    await seedAccount(h.sql, 'acct-2');
    const res = await h.request('/v1/clusters', { method: 'POST', token: 'enqueue', json: { accountId: 'acct-2', name, region: 'fra1', controlPlanes: 1, workers: 1, size: 's-2vcpu-4gb' } });
    expect(res.status).toBe(201);
    const { job } = await json(res);
    await h.trigger(TICK);
    const parkedRes = await json(await h.request(`/v1/jobs/${job.id}`));
    const parked = parkedRes.job;
    expect(parked).toMatchObject({ status: 'queued', step: 'awaiting_bootstrap', runAt: null });
    const command = parked.checkpoint.bootstrap_command ?? parked.checkpoint.bootstrapCommand;
    expect(command).toMatch(/^talosctl bootstrap --nodes (\S+) --endpoints \1 --talosconfig \.\/talosconfig$/);
    const ip = /--nodes (\S+)/.exec(command)![1]!;

    const early = await h.request(`/v1/clusters/${crypto.randomUUID()}/bootstrapped`, { method: 'POST' });
    expect(early.status).toBe(404);
    await fetch(`${sandbox}/_sandbox/digitalocean/bootstrap`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ip }) });
    const resumed = await h.request(`/v1/clusters/${job.id}/bootstrapped`, { method: 'POST' });
    expect(resumed.status).toBe(200);
    const after = (await json(await h.request(`/v1/jobs/${job.id}`))).job;
    expect(after.status).toBe('done');
    const [cluster] = await h.sql`select status from platform.clusters where id = ${job.id}`;
    expect(cluster!.status).toBe('active');
    const again = await h.request(`/v1/clusters/${job.id}/bootstrapped`, { method: 'POST' });
    expect(again.status).toBe(409);
  });
});
