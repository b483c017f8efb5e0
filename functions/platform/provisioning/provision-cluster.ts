/**
 * provision_cluster: a customer Talos cluster on droplets. The cluster's id is the job's id.
 *
 *   create              list the cluster's droplets by tag; create each planned node that is missing,
 *                       its user-data rendered from the operator's Talos machine configs
 *   wait_active         poll until every node is `active` with an address
 *   awaiting_bootstrap  waits for the `bootstrapped` event (waitFor, key: the cluster id) with the exact
 *                       `talosctl bootstrap` command in the checkpoint and in platform.clusters; the
 *                       event comes from `resumeBootstrappedCluster` (the POST /v1/clusters/:id/bootstrapped
 *                       route), or any signal (POST /v1/jobs/:id/signal, POST /v1/events, worker.signal);
 *                       one sent before the wait is kept for it. It then probes the Kubernetes API
 *   verify_api          probe again after a delay; after `probeAttempts` failures the job waits at
 *                       awaiting_bootstrap again (the operator fixes the bootstrap and signals)
 * When the API answers, the cluster is registered `active` with the add-ons it installs itself, in
 * the transaction that completes the job. Cancel or terminal failure deletes the droplets by tag.
 */
import { z } from 'zod';
import type { Queryable, Sql } from '../../../queue/db.ts';
import { enqueue, type EnqueueResult } from '../../../queue/enqueue.ts';
import { ConflictError, NotFoundError, PermanentError } from '../../../queue/errors.ts';
import type { Job } from '../../../queue/job.ts';
import { jobTypeOf } from '../../../queue/jobs-query.ts';
import { done, next, waitFor, type JobType, type StepContext } from '../../../queue/registry.ts';
import { signalJob } from '../../../queue/signals.ts';
import { getJob } from '../../../queue/inspect.ts';
import { parseCheckpoint } from '../checkpoint.ts';
import { parseRow } from '../rows.ts';
import type { CloudProvider, Droplet } from './ports/cloud-provider.ts';
import type { KubernetesProbe } from './ports/kubernetes-probe.ts';
import { assertOwnership } from '../../lib/tenancy.ts';
import { findActiveJob } from './active-jobs.ts';
import { assertAccountOwns } from './ownership.ts';
import { defineProvisioningJobType } from './job-type.ts';
import {
  clusterTag,
  nodeRoleTag,
  planClusterNodes,
  PROVISION_CONCURRENCY,
  provisioningConcurrencyKey,
  RESOURCE_TAG,
  type NodeRole,
} from './resources.ts';
import { renderNodeUserData, talosBootstrapCommand, type TalosMachineConfigs } from './talos.ts';

export const PROVISION_CLUSTER = 'provision_cluster';
/** Where provision_cluster is enqueued (it is internal: not over POST /v1/jobs with the enqueue token). */
export const PROVISION_CLUSTER_ROUTE = 'POST /v1/clusters';
export const AWAITING_BOOTSTRAP = 'awaiting_bootstrap';
/** The event the job waits for at awaiting_bootstrap (its key: the cluster id). */
export const BOOTSTRAPPED = 'bootstrapped';

/** The body of `POST /v1/clusters`, and the job's payload. */
export const provisionClusterRequest = z
  .object({
    accountId: z.string().min(1).max(200),
    name: z.string().regex(/^[a-z][a-z0-9-]{1,28}[a-z0-9]$/, 'name must be 3-30 lowercase letters, digits and dashes, starting with a letter'),
    region: z.string().regex(/^[a-z]{3}[0-9]$/, 'region must be a region slug such as nyc3'),
    // etcd needs a majority: an odd number of control planes.
    controlPlanes: z.union([z.literal(1), z.literal(3), z.literal(5)]),
    workers: z.number().int().min(0).max(50),
    size: z.string().regex(/^[a-z0-9][a-z0-9-]{1,60}$/, 'size must be a droplet size slug such as s-2vcpu-4gb'),
  })
  .strict();
export type ProvisionClusterRequest = z.infer<typeof provisionClusterRequest>;

/** What every cluster installs itself from its machine config (inline manifests), recorded on registration. */
export const SELF_INSTALLED_ADDONS = [
  { name: 'cilium', role: 'CNI and network policy' },
  { name: 'digitalocean-cloud-controller-manager', role: 'CCM: node addresses and load balancers' },
  { name: 'digitalocean-csi', role: 'CSI: block storage volumes' },
  { name: 'envoy-gateway', role: 'Gateway API ingress' },
  { name: 'telemetry-agents', role: 'metrics and log shipping' },
  { name: 'shuttle', role: 'Starbase in-cluster agent' },
].map((a) => ({ ...a, installedBy: 'cluster' }));

export interface ProvisionClusterDeps {
  cloud: CloudProvider;
  probe: KubernetesProbe;
  /** The operator's machine configs, decrypted (e.g. `(sql) => loadTalosMachineConfigs(sql, ring)`). */
  machineConfigs(sql: Sql): Promise<TalosMachineConfigs>;
  /** The Talos custom image at the provider (its id, or a slug). */
  talosImage: string | number;
  vpcUuid?: string;
  /** Between polls of booting droplets (default 10 s). */
  pollIntervalMs?: number;
  /** Droplets not active by then fail the job, which deletes them (default 20 min). */
  activeTimeoutMs?: number;
  /** Between probes of the Kubernetes API after a resume (default 15 s). */
  probeIntervalMs?: number;
  /** Probes after a resume before parking again (default 20). */
  probeAttempts?: number;
}

/** A type, not an interface: JSON-compatible as it is (the checkpoint, platform.clusters.nodes, the result). */
export type ClusterNode = {
  name: string;
  role: NodeRole;
  dropletId: number;
  publicIpv4: string;
  privateIpv4: string | null;
};

const clusterNode = z.object({
  name: z.string(),
  role: z.enum(['controlplane', 'worker']),
  dropletId: z.number(),
  publicIpv4: z.string(),
  // not every provider answer has a private address
  privateIpv4: z.string().nullable().catch(null),
}) satisfies z.ZodType<ClusterNode>;

/** While the droplets are being created: since when. */
const waitingCheckpoint = z.looseObject({ waitingSince: z.string().optional() });
/** From the park on: the nodes, the endpoint the probe asks, and the probes of this round. */
const parkedCheckpoint = z.looseObject({ nodes: z.array(clusterNode), endpoint: z.string().min(1), probes: z.number().int().min(0).optional() });

/** A live platform.clusters row of the same account and name (its id is its job's). */
const idRow = z.object({ id: z.string() });

/** Enqueue from a validated `POST /v1/clusters` body: 409 when the account has a live cluster of that name. */
export async function enqueueProvisionCluster(sql: Queryable, request: ProvisionClusterRequest, options: { submitKey?: string; now?: Date } = {}): Promise<EnqueueResult> {
  await assertOwnership(sql, request.accountId); // an OwnershipError (404) for an unknown account
  const [live] = await sql`select id from platform.clusters where account_id = ${request.accountId} and name = ${request.name} and status <> 'destroyed'`;
  if (live) throw new ConflictError(`account ${request.accountId} already has a cluster ${request.name} (${parseRow('platform.clusters', idRow, live).id})`, 'name');
  const pending = await findActiveJob(sql, PROVISION_CLUSTER, { accountId: request.accountId, name: request.name });
  if (pending) throw new ConflictError(`a cluster ${request.name} is already being provisioned for account ${request.accountId} (${pending})`, 'name');
  return enqueue(
    sql,
    {
      type: PROVISION_CLUSTER,
      payload: request,
      submitKey: options.submitKey,
      concurrencyKey: provisioningConcurrencyKey(request.accountId),
      concurrencyLimit: PROVISION_CONCURRENCY,
    },
    { now: options.now },
  );
}

/**
 * `POST /v1/clusters/:id/bootstrapped`: a thin alias of signalling `bootstrapped` to the cluster's
 * job. It resumes the job waiting at awaiting_bootstrap, or is kept for its next wait there.
 * NotFoundError (404) for an unknown cluster; ConflictError (409) when its job has ended.
 */
export async function resumeBootstrappedCluster(sql: Sql, clusterId: string, options: { now?: Date } = {}): Promise<Job> {
  if ((await jobTypeOf(sql, clusterId)) !== PROVISION_CLUSTER) throw new NotFoundError(`no cluster ${clusterId}`);
  await signalJob(sql, clusterId, BOOTSTRAPPED, { key: clusterId, now: options.now });
  const found = await getJob(sql, clusterId);
  if (!found) throw new NotFoundError(`no cluster ${clusterId}`);
  return found.job;
}

/** The node a droplet is, once it is active with a public address (null before). */
function nodeOf(droplet: Droplet | undefined, role: NodeRole): ClusterNode | null {
  if (droplet?.status !== 'active' || !droplet.publicIpv4) return null;
  return { name: droplet.name, role, dropletId: droplet.id, publicIpv4: droplet.publicIpv4, privateIpv4: droplet.privateIpv4 };
}

/** The deps with their defaults, as the steps below use them. */
function settle(deps: ProvisionClusterDeps) {
  return {
    ...deps,
    pollIntervalMs: deps.pollIntervalMs ?? 10_000,
    activeTimeoutMs: deps.activeTimeoutMs ?? 20 * 60_000,
    probeIntervalMs: deps.probeIntervalMs ?? 15_000,
    probeAttempts: deps.probeAttempts ?? 20,
  };
}
type Settled = ReturnType<typeof settle>;

async function create(deps: Settled, ctx: StepContext<ProvisionClusterRequest>) {
  const { payload: p, job, signal } = ctx;
  // Before any droplet is created, whatever path enqueued the job.
  await assertAccountOwns(ctx.sql, p.accountId);
  const [other] = await ctx.sql`
    select id from platform.clusters where account_id = ${p.accountId} and name = ${p.name} and status <> 'destroyed' and id <> ${job.id}`;
  if (other) throw new PermanentError(`account ${p.accountId} already has a cluster ${p.name} (${parseRow('platform.clusters', idRow, other).id})`);

  const tag = clusterTag(job.id);
  const configs = await deps.machineConfigs(ctx.sql);
  const existing = new Set((await deps.cloud.listDropletsByTag(tag, { signal })).map((d) => d.name));
  for (const node of planClusterNodes(p)) {
    if (existing.has(node.name)) continue;
    await deps.cloud.createDroplet(
      {
        name: node.name,
        region: p.region,
        size: p.size,
        image: deps.talosImage,
        userData: renderNodeUserData(configs, node, job.id),
        tags: [RESOURCE_TAG, tag, nodeRoleTag(node.role)],
        vpcUuid: deps.vpcUuid,
      },
      { signal },
    );
  }
  const now = ctx.now();
  return next('wait_active', {
    checkpoint: { waitingSince: now.toISOString() },
    delayMs: deps.pollIntervalMs,
    effect: async (tx) => {
      await tx`
        insert into platform.clusters (id, account_id, name, region, size, control_planes, workers, provider_tag, created_at, updated_at)
        values (${job.id}, ${p.accountId}, ${p.name}, ${p.region}, ${p.size}, ${p.controlPlanes}, ${p.workers}, ${tag}, ${now}, ${now})
        on conflict (id) do nothing`;
    },
  });
}

async function waitActive(deps: Settled, ctx: StepContext<ProvisionClusterRequest>) {
  const cp = parseCheckpoint(PROVISION_CLUSTER, waitingCheckpoint, ctx.checkpoint);
  const droplets = new Map((await deps.cloud.listDropletsByTag(clusterTag(ctx.job.id), { signal: ctx.signal })).map((d) => [d.name, d]));
  const plan = planClusterNodes(ctx.payload);
  // A node vanished (deleted behind our back): create it again.
  if (plan.some((n) => !droplets.has(n.name))) return next('create', { delayMs: 0 });
  const ready = plan.map((n) => ({ planned: n, node: nodeOf(droplets.get(n.name), n.role) }));
  const pending = ready.flatMap(({ planned, node }) => (node ? [] : [planned]));
  if (pending.length > 0) {
    const waited = ctx.now().getTime() - Date.parse(cp.waitingSince ?? ctx.now().toISOString());
    if (waited > deps.activeTimeoutMs) throw new PermanentError(`${pending.length} node(s) not active after ${Math.round(waited / 60_000)} min: ${pending.map((n) => n.name).join(', ')}`);
    return next('wait_active', { delayMs: deps.pollIntervalMs });
  }
  const nodes = ready.flatMap(({ node }) => (node ? [node] : []));
  const first = nodes.find((n) => n.role === 'controlplane');
  if (!first) throw new PermanentError('the cluster has no control plane node');
  const command = talosBootstrapCommand(first.publicIpv4);
  const now = ctx.now();
  return waitFor(BOOTSTRAPPED, {
    step: AWAITING_BOOTSTRAP,
    key: ctx.job.id,
    checkpoint: { nodes, endpoint: first.publicIpv4, bootstrapCommand: command, probes: 0 },
    effect: async (tx) => {
      await tx`
        update platform.clusters
           set status = 'awaiting_bootstrap', nodes = ${tx.json(nodes)}::jsonb, endpoint = ${first.publicIpv4},
               bootstrap_command = ${command}, updated_at = ${now}
         where id = ${ctx.job.id}`;
    },
  });
}

async function verifyApi(deps: Settled, ctx: StepContext<ProvisionClusterRequest>) {
  const cp = parseCheckpoint(PROVISION_CLUSTER, parkedCheckpoint, ctx.checkpoint);
  // A resume starts a fresh round of probes.
  const probes = ctx.step === AWAITING_BOOTSTRAP ? 0 : (cp.probes ?? 0);
  const probe = await deps.probe.version(cp.endpoint, { signal: ctx.signal });
  if (!probe.answered) {
    if (probes + 1 >= deps.probeAttempts) {
      return waitFor(BOOTSTRAPPED, { step: AWAITING_BOOTSTRAP, key: ctx.job.id, checkpoint: { probes: 0, lastProbe: `${probe.reason}; parked again after ${probes + 1} probes` } });
    }
    return next('verify_api', { checkpoint: { probes: probes + 1, lastProbe: probe.reason }, delayMs: deps.probeIntervalMs });
  }
  const now = ctx.now();
  const version = probe.version.gitVersion;
  return done(
    { clusterId: ctx.job.id, status: 'active', endpoint: cp.endpoint, kubernetesVersion: version, nodes: cp.nodes, addons: SELF_INSTALLED_ADDONS },
    async (tx) => {
      await tx`
        update platform.clusters
           set status = 'active', kubernetes_version = ${version}, addons = ${tx.json(SELF_INSTALLED_ADDONS)}::jsonb,
               active_at = ${now}, updated_at = ${now}
         where id = ${ctx.job.id}`;
    },
  );
}

/** Compensation: delete every droplet carrying the cluster's tag, then check none is left. */
async function destroy(deps: Settled, ctx: StepContext<ProvisionClusterRequest>) {
  const tag = clusterTag(ctx.job.id);
  await deps.cloud.deleteDropletsByTag(tag, { signal: ctx.signal });
  for (const left of await deps.cloud.listDropletsByTag(tag, { signal: ctx.signal })) await deps.cloud.deleteDroplet(left.id, { signal: ctx.signal });
  const now = ctx.now();
  await ctx.sql`update platform.clusters set status = 'destroyed', destroyed_at = ${now}, updated_at = ${now} where id = ${ctx.job.id} and status <> 'destroyed'`;
}

export function provisionClusterJobType(deps: ProvisionClusterDeps): JobType<ProvisionClusterRequest> {
  return defineProvisioningJobType({
    type: PROVISION_CLUSTER,
    enqueueVia: PROVISION_CLUSTER_ROUTE,
    payload: provisionClusterRequest,
    deps: settle(deps),
    steps: { start: create, create, wait_active: waitActive, [AWAITING_BOOTSTRAP]: verifyApi, verify_api: verifyApi },
    compensate: destroy,
  });
}
