import { seedAccount, seedService } from '../support/tenancy.ts';
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { enqueueProvisionCluster, resumeBootstrappedCluster } from '../../functions/platform/provisioning/provision-cluster.ts';
import { enqueueProvisionDb } from '../../functions/platform/provisioning/provision-db.ts';
import { provisioningJobTypes } from '../../functions/platform/provisioning/job-types.ts';
import { storeTalosMachineConfigs } from '../../functions/platform/provisioning/talos.ts';
import { generateEncryptionKey, parseKeyRing } from '../../functions/lib/secrets.ts';
import { isParked, isTerminal, provisioningRunner, provisioningTestContext, tickUntil } from './provision-support.ts';

const t = provisioningTestContext();

async function service(): Promise<{ accountId: string; serviceId: string }> {
  const ids = { accountId: `acct-${randomUUID().slice(0, 8)}`, serviceId: `svc-${randomUUID().slice(0, 8)}` };
  await seedService(t.db.sql, ids.serviceId, ids.accountId);
  return ids;
}

describe('provisioning job types from env', () => {
  it('without the secrets, the types still exist and fail naming what to set, calling nobody', async () => {
    const types = await provisioningJobTypes({ TALOS_IMAGE: '123' });
    expect(types.map((x) => x.type)).toEqual(['provision_db', 'provision_cluster']);
    const { job } = await enqueueProvisionDb(t.db.sql, { ...(await service()), name: 'main', size: 'db-s-1vcpu-1gb', region: 'nyc3' }, { now: t.clock.now() });
    const failed = await tickUntil(provisioningRunner(t.db.sql, types, t.clock, t.logs), t.clock, job.id, isTerminal);
    expect(failed.status).toBe('failed');
    expect(failed.lastError).toBe('provision_db is not configured in this deployment: set DIGITALOCEAN_TOKEN, ENCRYPTION_KEYS');
    expect(t.sandbox.calls('digitalocean')).toHaveLength(0);
  });

  it('with them, both jobs run against the configured API URL and probe URL template', async () => {
    const keys = `k1:${generateEncryptionKey()}`;
    const env = {
      DIGITALOCEAN_TOKEN: 'dop_v1_env',
      DIGITALOCEAN_API_URL: t.sandbox.url,
      ENCRYPTION_KEYS: keys,
      TALOS_IMAGE: '171234567',
      KUBERNETES_VERSION_URL: `${t.sandbox.url}/kube/{endpoint}/version`,
    };
    await storeTalosMachineConfigs(t.db.sql, { controlplane: 'machine:\n  type: controlplane\n', worker: 'machine:\n  type: worker\n' }, await parseKeyRing(keys));
    const runner = provisioningRunner(t.db.sql, await provisioningJobTypes(env), t.clock, t.logs);

    const { job: dbJob } = await enqueueProvisionDb(t.db.sql, { ...(await service()), name: 'main', size: 'db-s-1vcpu-1gb', region: 'nyc3' }, { now: t.clock.now() });
    expect((await tickUntil(runner, t.clock, dbJob.id, isTerminal, { advanceMs: 20_000 })).status).toBe('done');

    await seedAccount(t.db.sql, 'acct-env');
    const { job: clusterJob } = await enqueueProvisionCluster(t.db.sql, { accountId: 'acct-env', name: 'env', region: 'nyc3', controlPlanes: 1, workers: 0, size: 's-2vcpu-4gb' }, { now: t.clock.now() });
    const parked = await tickUntil(runner, t.clock, clusterJob.id, isParked, { advanceMs: 20_000 });
    const post = t.sandbox.calls('digitalocean').find((c) => c.method === 'POST' && c.path === '/v2/droplets')!;
    expect((post.body as { image: unknown }).image).toBe(171234567);
    await t.control.bootstrap(parked.checkpoint.endpoint as string);
    await resumeBootstrappedCluster(t.db.sql, clusterJob.id, { now: t.clock.now() });
    expect((await tickUntil(runner, t.clock, clusterJob.id, isTerminal, { advanceMs: 20_000 })).status).toBe('done');
  });
});
