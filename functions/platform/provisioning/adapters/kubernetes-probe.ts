/**
 * KubernetesProbe over `fetch`: GET <api>/version, which Kubernetes serves to anonymous clients
 * (the system:public-info-viewer role) as {major, minor, gitVersion, …}.
 *
 * In production the URL is https://<control-plane-ip>:6443/version. Two platform limits apply to a
 * Worker: fetch() does not reach bare IP addresses, and it cannot trust the cluster's own CA. So a
 * deployment points `urlFor` at a hostname that terminates TLS with a publicly trusted
 * certificate (e.g. a DNS name for the cluster endpoint behind a proxy); the default suits Node,
 * and tests point it at the sandbox.
 */
import type { KubernetesProbe, ProbeResult } from '../ports/kubernetes-probe.ts';

export interface FetchKubernetesProbeConfig {
  /** The /version URL for an endpoint; default https://<endpoint>:6443/version. */
  urlFor?: (endpoint: string) => string;
  timeoutMs?: number;
  fetch?: typeof fetch;
}

export class FetchKubernetesProbe implements KubernetesProbe {
  constructor(private readonly config: FetchKubernetesProbeConfig = {}) {}

  async version(endpoint: string, options: { signal?: AbortSignal } = {}): Promise<ProbeResult> {
    const url = this.config.urlFor?.(endpoint) ?? `https://${endpoint}:6443/version`;
    const timeout = AbortSignal.timeout(this.config.timeoutMs ?? 10_000);
    const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
    const doFetch = this.config.fetch ?? ((input, init) => globalThis.fetch(input, init));
    let response: Response;
    try {
      response = await doFetch(url, { headers: { accept: 'application/json' }, signal });
    } catch (error) {
      if (options.signal?.aborted) throw error;
      return { answered: false, reason: timeout.aborted ? 'timed out' : `unreachable: ${(error as Error).message}` };
    }
    if (!response.ok) {
      await response.body?.cancel();
      return { answered: false, reason: `answered ${response.status}` };
    }
    const body = (await response.json().catch(() => null)) as { major?: unknown; minor?: unknown; gitVersion?: unknown } | null;
    if (!body || typeof body.gitVersion !== 'string') return { answered: false, reason: 'answered without a Kubernetes version' };
    return { answered: true, version: { major: String(body.major ?? ''), minor: String(body.minor ?? ''), gitVersion: body.gitVersion } };
  }
}
