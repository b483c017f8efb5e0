import { seedAccount } from '../support/tenancy.ts';
import { randomBytes, randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { cancelJob, ConflictError, getJob, JobRegistry, NotFoundError } from '../../queue/index.ts';
import { FetchKubernetesProbe } from '../../functions/platform/provisioning/adapters/kubernetes-probe.ts';
import {
  AWAITING_BOOTSTRAP,
  enqueueProvisionCluster,
  provisionClusterJobType,
  provisionClusterRequest,
  resumeBootstrappedCluster,
  SELF_INSTALLED_ADDONS,
  type ProvisionClusterRequest,
} from '../../functions/platform/provisioning/provision-cluster.ts';
import { clusterTag } from '../../functions/platform/provisioning/resources.ts';
import { loadTalosMachineConfigs, storeTalosMachineConfigs, type TalosMachineConfigs } from '../../functions/platform/provisioning/talos.ts';
import { generateEncryptionKey, parseKeyRing, type KeyRing } from '../../functions/lib/secrets.ts';
import type { CloudProvider } from '../../functions/platform/provisioning/ports/cloud-provider.ts';
import type { KubernetesProbe } from '../../functions/platform/provisioning/ports/kubernetes-probe.ts';
import {
  crashingCloud,
  databaseDump,
  isParked,
  isTerminal,
  provisioningTestContext,
  provisioningRunner,
  runUntilCrash,
  tickUntil,
} from './provision-support.ts';

const t = provisioningTestContext();
let probe: KubernetesProbe;
let ring: KeyRing;

// Stand-ins for `talosctl gen config` output: the shape Talos writes, with secrets unique to this run.
const JOIN_TOKEN = `${randomBytes(3).toString('hex')}.${randomBytes(8).toString('hex')}`;
const CA_KEY = randomBytes(48).toString('base64');
const configs: TalosMachineConfigs = {
  controlplane: `version: v1alpha1 # Indicates the schema used to decode the contents.
debug: false
persist: true
# Provides machine specific configuration options.
machine:
    type: controlplane # Defines the role of the machine within the cluster.
    token: ${JOIN_TOKEN}
    ca:
        crt: LS0tLS1CRUdJTi
        key: ${CA_KEY}
cluster:
    controlPlane:
        endpoint: https://k8s.example.test:6443
    clusterName: demo
`,
  worker: `version: v1alpha1
machine:
    # The role of the machine.
    type: worker
    token: ${JOIN_TOKEN}
cluster:
    controlPlane:
        endpoint: https://k8s.example.test:6443
`,
};

const TALOS_IMAGE = 171_234_567;
const typesWith = (c: CloudProvider) => [
  provisionClusterJobType({
    cloud: c,
    probe,
    machineConfigs: (sql) => loadTalosMachineConfigs(sql, ring),
    talosImage: TALOS_IMAGE,
    pollIntervalMs: 10_000,
    probeIntervalMs: 10_000,
    probeAttempts: 3,
  }),
];
const runner = () => provisioningRunner(t.db.sql, typesWith(t.cloud), t.clock, t.logs);

beforeAll(async () => {
  probe = new FetchKubernetesProbe({ urlFor: (ip) => `${t.sandbox.url}/kube/${ip}/version` });
  ring = await parseKeyRing(`ops2030:${generateEncryptionKey()}`);
  await storeTalosMachineConfigs(t.db.sql, configs, ring);
});

function request(overrides: Partial<ProvisionClusterRequest> = {}): ProvisionClusterRequest {
  return { accountId: `acct-${randomUUID().slice(0, 8)}`, name: 'demo', region: 'fra1', controlPlanes: 1, workers: 1, size: 's-2vcpu-4gb', ...overrides };
}

async function enqueued(req: ProvisionClusterRequest): Promise<string> {
  await seedAccount(t.db.sql, req.accountId); // the account must exist (lib/tenancy.ts)
  return (await enqueueProvisionCluster(t.db.sql, req, { now: t.clock.now() })).job.id;
}

async function dropletsOf(clusterId: string) {
  return (await t.control.state()).droplets.filter((d) => d.tags.includes(clusterTag(clusterId)));
}

/** The operator's part: run talosctl bootstrap (the sandbox's API starts answering), then tell us. */
async function bootstrapAndResume(clusterId: string): Promise<void> {
  const ip = ((await getJob(t.db.sql, clusterId))!.job.checkpoint.endpoint as string);
  await t.control.bootstrap(ip);
  await resumeBootstrappedCluster(t.db.sql, clusterId, { now: t.clock.now() });
}

describe('provision_cluster', () => {
  it('provisions by ticks, parks at awaiting_bootstrap with the exact command, and registers the cluster active once resumed', async () => {
    const req = request({ controlPlanes: 3, workers: 2 });
    await new JobRegistry(typesWith(t.cloud)).sync(t.db.sql);
    const clusterId = await enqueued(req);
    // the manual's infra SLA: 4 h from the request, at the P1 severity (the type's, once synced as a
    // deployment syncs its types before it takes a request)
    const { job: queued } = (await getJob(t.db.sql, clusterId))!;
    expect(queued.deadlineSeverity).toBe('critical');
    expect(queued.deadlineAt!.getTime() - queued.createdAt.getTime()).toBe(4 * 3_600_000);
    const parked = await tickUntil(runner(), t.clock, clusterId, isParked);
    expect(parked.step).toBe(AWAITING_BOOTSTRAP);

    const droplets = await dropletsOf(clusterId);
    expect(droplets.map((d) => d.name).sort()).toEqual(['demo-cp-1', 'demo-cp-2', 'demo-cp-3', 'demo-worker-1', 'demo-worker-2']);
    expect(droplets.every((d) => d.status === 'active' && d.tags.includes('starbase'))).toBe(true);
    const cp1 = droplets.find((d) => d.name === 'demo-cp-1')!;
    const command = `talosctl bootstrap --nodes ${cp1.publicIpv4} --endpoints ${cp1.publicIpv4} --talosconfig ./talosconfig`;
    expect(parked.checkpoint).toMatchObject({ endpoint: cp1.publicIpv4, bootstrapCommand: command });
    const [waiting] = await t.db.sql`select status, bootstrap_command, endpoint, jsonb_array_length(nodes) as n from platform.clusters where id = ${clusterId}`;
    expect(waiting).toEqual({ status: 'awaiting_bootstrap', bootstrap_command: command, endpoint: cp1.publicIpv4, n: 5 });

    // Each node booted with its role's machine config, tagged with the cluster and its role.
    const posts = t.sandbox.calls('digitalocean').filter((c) => c.method === 'POST' && c.path === '/v2/droplets' && JSON.stringify(c.body).includes(clusterTag(clusterId)));
    expect(posts).toHaveLength(5);
    for (const post of posts) {
      const body = post.body as { name: string; image: number; region: string; size: string; user_data: string; tags: string[] };
      const role = body.name.includes('-cp-') ? 'controlplane' : 'worker';
      expect(body).toMatchObject({ image: TALOS_IMAGE, region: 'fra1', size: 's-2vcpu-4gb' });
      expect(body.tags).toEqual(['starbase', clusterTag(clusterId), `starbase-role-${role}`]);
      expect(body.user_data).toBe(`# starbase cluster ${clusterId}: node ${body.name} (${role})\n${configs[role]}`);
    }

    // Parked means parked: ticks do nothing until the operator says so.
    t.clock.advance(3_600_000);
    await tickUntil(runner(), t.clock, clusterId, () => true, { maxTicks: 1 });
    expect((await getJob(t.db.sql, clusterId))!.job).toMatchObject({ status: 'queued', step: AWAITING_BOOTSTRAP });

    await bootstrapAndResume(clusterId);
    const job = await tickUntil(runner(), t.clock, clusterId, isTerminal);
    expect(job.status).toBe('done');
    expect(job.result).toMatchObject({ clusterId, status: 'active', endpoint: cp1.publicIpv4, kubernetesVersion: 'v1.32.3', addons: SELF_INSTALLED_ADDONS });
    const [row] = await t.db.sql`select status, kubernetes_version, addons from platform.clusters where id = ${clusterId}`;
    expect(row).toMatchObject({ status: 'active', kubernetes_version: 'v1.32.3' });
    expect((row!.addons as { name: string }[]).map((a) => a.name)).toEqual([
      'cilium',
      'digitalocean-cloud-controller-manager',
      'digitalocean-csi',
      'envoy-gateway',
      'telemetry-agents',
      'shuttle',
    ]);
    const { events } = (await getJob(t.db.sql, clusterId))!;
    // the park is a wait for `bootstrapped`: no claim from the wait to the event, which the alias sent
    const kinds = events.map((e) => e.kind);
    expect(kinds.slice(kinds.indexOf('waiting'), kinds.indexOf('signalled') + 1)).toEqual(['waiting', 'signalled']);
    expect(events.find((e) => e.kind === 'waiting')!.detail).toMatchObject({ name: 'bootstrapped', key: clusterId, step: AWAITING_BOOTSTRAP });
    expect(await dropletsOf(clusterId)).toHaveLength(5);
  });

  it('parks again when the API does not answer after a resume, and finishes after a real bootstrap', async () => {
    const clusterId = await enqueued(request({ name: 'slow' }));
    await tickUntil(runner(), t.clock, clusterId, isParked);
    await resumeBootstrappedCluster(t.db.sql, clusterId, { now: t.clock.now() }); // resumed, but nobody ran talosctl
    const reparked = await tickUntil(runner(), t.clock, clusterId, isParked);
    expect(reparked.step).toBe(AWAITING_BOOTSTRAP);
    expect(reparked.checkpoint.lastProbe).toMatch(/answered 503; parked again after 3 probes/);
    const { events } = (await getJob(t.db.sql, clusterId))!;
    expect(events.filter((e) => e.kind === 'checkpoint' && e.detail.step === 'verify_api')).toHaveLength(2);

    await bootstrapAndResume(clusterId);
    expect((await tickUntil(runner(), t.clock, clusterId, isTerminal)).status).toBe('done');
  });

  it('resume answers 404 for an unknown cluster and 409 once its job ended; one sent before the wait is kept for it', async () => {
    await expect(resumeBootstrappedCluster(t.db.sql, randomUUID())).rejects.toBeInstanceOf(NotFoundError);
    await expect(resumeBootstrappedCluster(t.db.sql, 'not-a-uuid')).rejects.toBeInstanceOf(NotFoundError);
    const clusterId = await enqueued(request({ name: 'early' }));
    const early = await resumeBootstrappedCluster(t.db.sql, clusterId, { now: t.clock.now() });
    expect(early).toMatchObject({ status: 'queued', step: 'start' });
    const [kept] = await t.db.sql`select name, key from worker.signal_events where job_id = ${clusterId}`;
    expect(kept).toEqual({ name: 'bootstrapped', key: clusterId });
    await cancelJob(t.db.sql, clusterId); // never started: cancelled at once
    await expect(resumeBootstrappedCluster(t.db.sql, clusterId)).rejects.toBeInstanceOf(ConflictError);
  });

  it('resumes after a crash right after each provider call without creating a droplet twice', async () => {
    const counting = crashingCloud(t.cloud, Number.POSITIVE_INFINITY, async () => {});
    const counted = await enqueued(request({ name: 'counted' }));
    await tickUntil(provisioningRunner(t.db.sql, typesWith(counting.cloud), t.clock, t.logs), t.clock, counted, isParked);
    const total = counting.calls();
    expect(total).toBeGreaterThanOrEqual(4); // list, create × 2, list until active

    for (let crashAt = 1; crashAt <= total; crashAt++) {
      const clusterId = await enqueued(request({ name: `crash${crashAt}` }));
      await runUntilCrash(t.db, typesWith, t.cloud, crashAt, t.clock, clusterId, t.logs);
      expect((await getJob(t.db.sql, clusterId))!.job.status).toBe('running');
      t.clock.advance(300_000 + 1_000);
      await tickUntil(runner(), t.clock, clusterId, isParked);
      await bootstrapAndResume(clusterId);
      const job = await tickUntil(runner(), t.clock, clusterId, isTerminal);
      expect(job.status, `crash after call ${crashAt}`).toBe('done');
      expect(job.crashes).toBe(1);
      const droplets = await dropletsOf(clusterId);
      expect(droplets.map((d) => d.name).sort(), `crash after call ${crashAt}`).toEqual([`crash${crashAt}-cp-1`, `crash${crashAt}-worker-1`]);
      expect(t.control.callsMentioning(clusterTag(clusterId), 'POST', '/v2/droplets'), `crash after call ${crashAt}`).toHaveLength(2);
    }
  });

  it('honours 429 (pausing the DigitalOcean key) and 5xx (a delayed step) on droplet creation, without a duplicate droplet', async () => {
    await t.control.fault(
      { method: 'POST', path: '/v2/droplets', status: 429, count: 1, retryAfter: 30 },
      { method: 'POST', path: '/v2/droplets', status: 502, count: 1, afterEffect: true },
    );
    const clusterId = await enqueued(request({ name: 'limited' }));
    const before = t.clock.now();
    await tickUntil(runner(), t.clock, clusterId, () => true, { maxTicks: 1 });
    const limited = (await getJob(t.db.sql, clusterId))!.job;
    expect(limited).toMatchObject({ status: 'queued', step: 'start', attempts: 0 });
    expect(limited.runAt.getTime() - before.getTime()).toBe(30_000);
    expect(limited.checkpoint.providerRetry).toBeUndefined(); // the key is paused instead
    expect((await getJob(t.db.sql, clusterId))!.events.find((e) => e.kind === 'lease_released')?.detail).toMatchObject({ rateKey: 'provider:digitalocean' });
    expect(await dropletsOf(clusterId)).toHaveLength(0);

    t.clock.advance(30_000);
    await tickUntil(runner(), t.clock, clusterId, () => true, { maxTicks: 1 });
    const afterBadGateway = (await getJob(t.db.sql, clusterId))!.job;
    expect(afterBadGateway.checkpoint.providerRetry).toMatchObject({ count: 1, status: 502 });
    expect(await dropletsOf(clusterId)).toHaveLength(1); // created, though the answer was a 502

    await tickUntil(runner(), t.clock, clusterId, isParked);
    expect((await dropletsOf(clusterId)).map((d) => d.name).sort()).toEqual(['limited-cp-1', 'limited-worker-1']);
    expect(t.control.callsMentioning(clusterTag(clusterId), 'POST', '/v2/droplets')).toHaveLength(3); // 429, 502 (acted), the worker
    const { events } = (await getJob(t.db.sql, clusterId))!;
    expect(events.some((e) => e.kind === 'retry')).toBe(false);
    await cancelJob(t.db.sql, clusterId, 'test done', { now: t.clock.now() });
    await tickUntil(runner(), t.clock, clusterId, isTerminal);
  });

  it('cancel while awaiting bootstrap destroys every droplet of the cluster', async () => {
    const clusterId = await enqueued(request({ name: 'cancelme', controlPlanes: 3, workers: 3 }));
    await tickUntil(runner(), t.clock, clusterId, isParked);
    expect(await dropletsOf(clusterId)).toHaveLength(6);
    const others = (await t.control.state()).droplets.length - 6;
    await cancelJob(t.db.sql, clusterId, 'customer left', { now: t.clock.now() });
    const job = await tickUntil(runner(), t.clock, clusterId, isTerminal);
    expect(job.status).toBe('cancelled');
    expect(await dropletsOf(clusterId)).toHaveLength(0);
    expect((await t.control.state()).droplets).toHaveLength(others); // only this cluster's droplets went
    expect(t.sandbox.calls('digitalocean').some((c) => c.method === 'DELETE' && c.path === '/v2/droplets' && c.query.includes(encodeURIComponent(clusterTag(clusterId))))).toBe(true);
    const [row] = await t.db.sql`select status, destroyed_at from platform.clusters where id = ${clusterId}`;
    expect(row!.status).toBe('destroyed');
    // The name is free again.
    const again = await enqueued(request({ accountId: (job.payload as ProvisionClusterRequest).accountId, name: 'cancelme' }));
    await cancelJob(t.db.sql, again);
  });

  it('a terminal failure destroys what was created', async () => {
    const clusterId = await enqueued(request({ name: 'doomed' }));
    await tickUntil(runner(), t.clock, clusterId, (j) => j.step === 'wait_active');
    expect(await dropletsOf(clusterId)).toHaveLength(2);
    await t.control.fault({ method: 'GET', path: '/v2/droplets', status: 500, count: 1_000 });
    const job = await tickUntil(runner(), t.clock, clusterId, isTerminal, { advanceMs: 10 * 60_000 });
    expect(job.status).toBe('failed');
    expect(job.lastError).toMatch(/GET \/v2\/droplets\?tag_name answered 500/);
    await t.control.clearFaults();
    expect(await dropletsOf(clusterId)).toHaveLength(0);
  });

  it('enqueue refuses a second live cluster of the same name for the account', async () => {
    const req = request({ name: 'twice' });
    const clusterId = await enqueued(req);
    await expect(enqueueProvisionCluster(t.db.sql, req)).rejects.toBeInstanceOf(ConflictError);
    await tickUntil(runner(), t.clock, clusterId, isParked);
    await expect(enqueueProvisionCluster(t.db.sql, req)).rejects.toBeInstanceOf(ConflictError);
    await cancelJob(t.db.sql, clusterId, 'test done', { now: t.clock.now() });
    await tickUntil(runner(), t.clock, clusterId, isTerminal);
  });

  it('validates the request body, naming the bad field', () => {
    const ok = request();
    expect(provisionClusterRequest.safeParse(ok).success).toBe(true);
    for (const [field, value] of [['controlPlanes', 2], ['workers', -1], ['name', 'Bad_Name'], ['region', 'europe'], ['size', '']] as const) {
      const result = provisionClusterRequest.safeParse({ ...ok, [field]: value });
      expect(result.success, field).toBe(false);
      expect(result.error!.issues[0]!.path).toEqual([field]);
    }
  });

  it('keeps the Talos machine configs sealed: no token or key in any table or log line', async () => {
    const [stored] = await t.db.sql`select kid, iv, ct from platform.sealed_secrets where name = 'talos_machine_configs'`;
    expect(stored!.kid).toBe('ops2030');
    expect(await loadTalosMachineConfigs(t.db.sql, ring)).toEqual(configs);
    const dump = await databaseDump(t.db.sql);
    expect(dump).toContain('awaiting_bootstrap');
    expect(dump.includes(JOIN_TOKEN)).toBe(false);
    expect(dump.includes(CA_KEY)).toBe(false);
    const logText = JSON.stringify(t.logs);
    expect(t.logs.length).toBeGreaterThan(20);
    expect(logText.includes(JOIN_TOKEN) || logText.includes(CA_KEY)).toBe(false);
    // A config that is not a Talos machine config of the right role is refused before it is stored.
    await expect(storeTalosMachineConfigs(t.db.sql, { controlplane: configs.worker, worker: configs.worker }, ring)).rejects.toThrow(/machine.type worker/);
    await expect(loadTalosMachineConfigs(t.db.sql, await parseKeyRing(generateEncryptionKey()))).rejects.toThrow(/do not decrypt/);
  });
});
