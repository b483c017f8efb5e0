/**
 * Does a cluster's Kubernetes API answer? The provisioning job asks this after an operator has
 * bootstrapped a Talos cluster, before it registers the cluster as active.
 */

export interface KubernetesVersion {
  major: string;
  minor: string;
  gitVersion: string;
}

export type ProbeResult = { answered: true; version: KubernetesVersion } | { answered: false; reason: string };

export interface KubernetesProbe {
  /** Ask the API server at `endpoint` (a control-plane address) for its version. Never throws for "not up yet". */
  version(endpoint: string, options?: { signal?: AbortSignal }): Promise<ProbeResult>;
}
