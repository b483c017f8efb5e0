/**
 * How provisioning names and tags what it creates at the cloud provider. Every name and tag is
 * derived from the owning job's id alone, so a re-run of a step (after a crash, a timeout, a
 * retry) finds what an earlier run created instead of creating a second one, and compensation
 * and the cleanup sweep find everything a job made by one tag.
 */

/** On every resource provisioning creates: the cleanup sweep's starting point. */
export const RESOURCE_TAG = 'starbase';

/** Provisioning jobs of one account share this concurrency key: at most PROVISION_CONCURRENCY run at once. */
export function provisioningConcurrencyKey(accountId: string): string {
  return `provision:${accountId}`;
}
export const PROVISION_CONCURRENCY = 2;

/** The tag on the managed database a provision_db job creates. */
export function databaseTag(jobId: string): string {
  return `starbase-db-${jobId}`;
}

/** The provider-side cluster name: readable, unique per job (DigitalOcean names are unique per account). */
export function databaseClusterName(name: string, jobId: string): string {
  return `sb-${name}-${jobId.replace(/-/g, '').slice(0, 10)}`;
}

/** The connection pool's name (also the database name in its connection string). */
export function databasePoolName(name: string): string {
  return `${name}-pool`;
}

/** A cluster's id is the id of the job that provisions it; its droplets carry this tag. */
export function clusterTag(clusterId: string): string {
  return `starbase-cluster-${clusterId}`;
}

export type NodeRole = 'controlplane' | 'worker';

export function nodeRoleTag(role: NodeRole): string {
  return `starbase-role-${role}`;
}

export interface PlannedNode {
  name: string;
  role: NodeRole;
}

/** The nodes of a cluster, control planes first (the first one is where etcd is bootstrapped). */
export function planClusterNodes(cluster: { name: string; controlPlanes: number; workers: number }): PlannedNode[] {
  return [
    ...Array.from({ length: cluster.controlPlanes }, (_, i) => ({ name: `${cluster.name}-cp-${i + 1}`, role: 'controlplane' as const })),
    ...Array.from({ length: cluster.workers }, (_, i) => ({ name: `${cluster.name}-worker-${i + 1}`, role: 'worker' as const })),
  ];
}
