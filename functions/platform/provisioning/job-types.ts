/**
 * The provisioning job types, from the Worker's settings (the composition root, ../compose.ts,
 * passes its parsed config; Node callers pass process.env):
 *
 *   DIGITALOCEAN_TOKEN     secret: a DigitalOcean API token with read + write scope
 *   DIGITALOCEAN_API_URL   default https://api.digitalocean.com (the sandbox's URL on `npm start`)
 *   ENCRYPTION_KEYS        secret: "kid:<base64 32 bytes>[,older…]", the first seals (see lib/secrets.ts)
 *   TALOS_IMAGE            the Talos custom image at DigitalOcean (its numeric id, or a slug)
 *   DIGITALOCEAN_VPC_UUID  optional: the VPC cluster droplets join
 *   KUBERNETES_VERSION_URL optional: where a cluster's /version is probed, `{endpoint}` replaced by
 *                          the first control plane's address; default https://{endpoint}:6443/version
 *   PROVISION_POLL_INTERVAL_MS optional: between polls of resources being created
 *
 * The Talos machine configs are not env: they are sealed in platform.sealed_secrets
 * (storeTalosMachineConfigs) and opened with ENCRYPTION_KEYS when a cluster step needs them.
 *
 * With a variable missing, the types are still registered (so such a job fails with a message
 * naming what to set, instead of "unknown job type"), and nothing is sent anywhere. With all set,
 * the key ring is parsed and the clients made only when a provisioning step first runs (one key
 * ring and one DigitalOcean client for both types): a request that runs none pays for neither.
 */
import { PermanentError } from '../../../queue/errors.ts';
import { defineJobType, type JobType } from '../../../queue/registry.ts';
import { DigitalOceanCloudProvider } from './adapters/digitalocean.ts';
import { FetchKubernetesProbe } from './adapters/kubernetes-probe.ts';
import { parseKeyRing } from '../../lib/secrets.ts';
import { provisionClusterJobType, provisionClusterRequest, PROVISION_CLUSTER, PROVISION_CLUSTER_ROUTE } from './provision-cluster.ts';
import { provisionDbJobType, provisionDbRequest, PROVISION_DB, PROVISION_DB_ROUTE } from './provision-db.ts';
import { DIGITALOCEAN_RATE_LIMIT, provisioningConcurrency } from './job-type.ts';
import { loadTalosMachineConfigs } from './talos.ts';
import { lazyJobType, unbuilt } from '../lazy.ts';
import type { CloudProvider } from './ports/cloud-provider.ts';
import type { KeyRing } from '../../lib/secrets.ts';

export interface ProvisioningEnv {
  DIGITALOCEAN_TOKEN?: string;
  DIGITALOCEAN_API_URL?: string;
  ENCRYPTION_KEYS?: string;
  TALOS_IMAGE?: string;
  DIGITALOCEAN_VPC_UUID?: string;
  KUBERNETES_VERSION_URL?: string;
  /** Between polls of a resource being created (default 15 s for databases, 10 s for droplets). */
  PROVISION_POLL_INTERVAL_MS?: string;
}

function unconfigured(type: string, payload: typeof provisionDbRequest | typeof provisionClusterRequest, missing: string[]): JobType<any> {
  return defineJobType<unknown>({
    type,
    // declared as the configured types are: the registry sync stores what the last runner had
    enqueueVia: type === PROVISION_DB ? PROVISION_DB_ROUTE : PROVISION_CLUSTER_ROUTE,
    concurrency: provisioningConcurrency,
    rateLimit: DIGITALOCEAN_RATE_LIMIT,
    payload: payload as never,
    async run() {
      throw new PermanentError(`${type} is not configured in this deployment: set ${missing.join(', ')}`);
    },
  });
}

export async function provisioningJobTypes(env: ProvisioningEnv, onBuild?: (type: string) => void): Promise<JobType<any>[]> {
  const missingDb = (['DIGITALOCEAN_TOKEN', 'ENCRYPTION_KEYS'] as const).filter((k) => !env[k]);
  const missingCluster = [...missingDb, ...(env.TALOS_IMAGE ? [] : ['TALOS_IMAGE'])];
  if (missingDb.length > 0) {
    return [unconfigured(PROVISION_DB, provisionDbRequest, missingDb), unconfigured(PROVISION_CLUSTER, provisionClusterRequest, missingCluster)];
  }
  let shared: Promise<{ cloud: CloudProvider; keyRing: KeyRing }> | undefined;
  const adapters = () =>
    (shared ??= parseKeyRing(env.ENCRYPTION_KEYS).then((keyRing) => ({
      keyRing,
      cloud: new DigitalOceanCloudProvider({ token: env.DIGITALOCEAN_TOKEN!, baseUrl: env.DIGITALOCEAN_API_URL || undefined }),
    })));
  const pollIntervalMs = env.PROVISION_POLL_INTERVAL_MS ? Number(env.PROVISION_POLL_INTERVAL_MS) : undefined;
  const declaredDb = provisionDbJobType({ cloud: unbuilt('the DigitalOcean client'), keyRing: unbuilt('the key ring'), pollIntervalMs });
  const db = lazyJobType(declaredDb, async () => provisionDbJobType({ ...(await adapters()), pollIntervalMs }), onBuild);
  const talosImage = env.TALOS_IMAGE;
  if (!talosImage) return [db, unconfigured(PROVISION_CLUSTER, provisionClusterRequest, missingCluster)];
  const urlTemplate = env.KUBERNETES_VERSION_URL;
  const clusterDeps = {
    talosImage: /^\d+$/.test(talosImage) ? Number(talosImage) : talosImage,
    vpcUuid: env.DIGITALOCEAN_VPC_UUID || undefined,
    pollIntervalMs,
    probeIntervalMs: pollIntervalMs,
  };
  const declaredCluster = provisionClusterJobType({ ...clusterDeps, cloud: unbuilt('the DigitalOcean client'), probe: unbuilt('the Kubernetes probe'), machineConfigs: unbuilt('the Talos machine configs') });
  const cluster = lazyJobType(
    declaredCluster,
    async () => {
      const { cloud, keyRing } = await adapters();
      return provisionClusterJobType({
        ...clusterDeps,
        cloud,
        probe: new FetchKubernetesProbe(urlTemplate ? { urlFor: (endpoint) => urlTemplate.replaceAll('{endpoint}', endpoint) } : {}),
        // read and opened when a cluster step needs them, not when the type is built
        machineConfigs: (sql) => loadTalosMachineConfigs(sql, keyRing),
      });
    },
    onBuild,
  );
  return [db, cluster];
}
