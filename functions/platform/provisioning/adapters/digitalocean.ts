/**
 * CloudProvider over the DigitalOcean v2 API (plain `fetch`, `Authorization: Bearer <token>`).
 *
 * Endpoints and fields used (DigitalOcean's OpenAPI spec, digitalocean/openapi `specification/`):
 * - POST   /v2/databases {name, engine, version?, region, size, num_nodes, tags} → 201 {database}
 * - GET    /v2/databases/{uuid} → {database: {id, name, engine, status, region, size, tags, …}}
 * - GET    /v2/databases?tag_name=T → {databases: [...]}
 * - DELETE /v2/databases/{uuid} → 204
 * - POST   /v2/databases/{uuid}/pools {name, mode, size, db, user} → 201 {pool: {…, connection: {uri, …},
 *          private_connection}}; GET /v2/databases/{uuid}/pools/{name} → {pool}
 * - POST   /v2/droplets {name, region, size, image, user_data, tags, vpc_uuid?} → 202 {droplet}
 * - GET    /v2/droplets/{id} → {droplet: {id, name, status: new|active|off|archive, tags,
 *          networks: {v4: [{ip_address, type: public|private}]}}}
 * - GET    /v2/droplets?tag_name=T&per_page=200&page=N → {droplets, links: {pages: {next}}}
 * - DELETE /v2/droplets/{id} → 204; DELETE /v2/droplets?tag_name=T → 204
 * Errors are {id, message}. 429 carries `Retry-After` (seconds) and/or `ratelimit-reset` (epoch
 * seconds). This adapter never sleeps or retries: it throws a CloudProviderError saying whether
 * and when a retry makes sense, and the job turns that into a delayed step.
 */
import {
  CloudProviderError,
  CloudRateLimitError,
  type CallOptions,
  type CloudProvider,
  type ConnectionPool,
  type CreateDatabaseInput,
  type CreateDropletInput,
  type CreatePoolInput,
  type DatabaseCluster,
  type Droplet,
} from '../ports/cloud-provider.ts';
import { Secret } from '../../../lib/secrets.ts';
import { scrubText } from '../../../lib/redact.ts';

export interface DigitalOceanConfig {
  /** A personal access token (read + write); sent only in the Authorization header. */
  token: string;
  /** Default https://api.digitalocean.com; the sandbox's URL in tests. */
  baseUrl?: string;
  /** Per request; default 30 s. */
  timeoutMs?: number;
  fetch?: typeof fetch;
  /** Wall clock for `ratelimit-reset` (pinned in tests). */
  now?: () => number;
}

const DEFAULT_BASE_URL = 'https://api.digitalocean.com';
/** When a 429 says nothing about when to come back. */
const DEFAULT_RATE_LIMIT_WAIT_MS = 60_000;
const MAX_RETRY_AFTER_MS = 60 * 60_000;
const PAGE_SIZE = 200;
const MAX_PAGES = 50;

interface DoDatabase {
  id: string;
  name: string;
  engine: string;
  status: string;
  region: string;
  size: string;
  tags?: string[] | null;
  created_at?: string;
}

interface DoConnection {
  uri?: string;
}

interface DoPool {
  name: string;
  mode: string;
  size: number;
  db: string;
  user?: string;
  connection?: DoConnection | null;
  private_connection?: DoConnection | null;
}

interface DoDroplet {
  id: number;
  name: string;
  status: string;
  tags?: string[] | null;
  created_at?: string;
  networks?: { v4?: { ip_address: string; type: string }[] };
}

function toDatabase(d: DoDatabase): DatabaseCluster {
  return { id: d.id, name: d.name, engine: d.engine, status: d.status, region: d.region, size: d.size, tags: d.tags ?? [], createdAt: d.created_at ?? null };
}

function toPool(p: DoPool): ConnectionPool {
  return {
    name: p.name,
    mode: p.mode,
    size: p.size,
    db: p.db,
    user: p.user ?? '',
    uri: p.connection?.uri ? new Secret(p.connection.uri) : null,
    privateUri: p.private_connection?.uri ? new Secret(p.private_connection.uri) : null,
  };
}

function toDroplet(d: DoDroplet): Droplet {
  const v4 = d.networks?.v4 ?? [];
  return {
    id: d.id,
    name: d.name,
    status: d.status,
    tags: d.tags ?? [],
    publicIpv4: v4.find((n) => n.type === 'public')?.ip_address ?? null,
    privateIpv4: v4.find((n) => n.type === 'private')?.ip_address ?? null,
    createdAt: d.created_at ?? null,
  };
}

/** How long a 429 asks us to wait: Retry-After (seconds or an HTTP date), else ratelimit-reset (epoch seconds). */
export function retryAfterMs(headers: Headers, now: number): number | null {
  const retryAfter = headers.get('retry-after');
  if (retryAfter) {
    const seconds = Number(retryAfter);
    if (Number.isFinite(seconds) && seconds >= 0) return clampWait(seconds * 1000);
    const at = Date.parse(retryAfter);
    if (!Number.isNaN(at)) return clampWait(at - now);
  }
  const reset = Number(headers.get('ratelimit-reset'));
  if (headers.get('ratelimit-reset') && Number.isFinite(reset) && reset > 0) return clampWait(reset * 1000 - now);
  return null;
}

function clampWait(ms: number): number {
  return Math.min(MAX_RETRY_AFTER_MS, Math.max(0, Math.round(ms)));
}

/** A create call's answer: DigitalOcean always sends one (null is a 204 or an empty body), and retrying finds the resource by tag. */
function answered<T>(res: T | null, label: string): T {
  if (res === null) throw new CloudProviderError(`DigitalOcean ${label} answered without a body`, 0, true);
  return res;
}

export class DigitalOceanCloudProvider implements CloudProvider {
  private readonly baseUrl: string;
  private readonly fetch: typeof fetch;
  private readonly now: () => number;

  constructor(private readonly config: DigitalOceanConfig) {
    if (!config.token) throw new Error('DigitalOcean: no API token configured (DIGITALOCEAN_TOKEN)');
    this.baseUrl = (config.baseUrl ?? DEFAULT_BASE_URL).replace(/\/+$/, '');
    this.fetch = config.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this.now = config.now ?? Date.now;
  }

  /**
   * One API call. `label` names it in errors (method and path template, no secrets). A 404 is
   * returned as null when `allowNotFound`; every other non-2xx throws a CloudProviderError.
   */
  private async call<T>(method: string, path: string, label: string, body: unknown, options: CallOptions & { allowNotFound?: boolean } = {}): Promise<T | null> {
    const timeout = AbortSignal.timeout(this.config.timeoutMs ?? 30_000);
    const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
    let response: Response;
    try {
      response = await this.fetch(`${this.baseUrl}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${this.config.token}`,
          accept: 'application/json',
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal,
      });
    } catch (error) {
      if (options.signal?.aborted) throw error; // our own abort (lease lost, shutdown): not the provider's fault
      const reason = timeout.aborted ? 'timed out' : `failed: ${(error as Error).message}`;
      // The request may have reached DigitalOcean: callers find by tag before creating again.
      throw new CloudProviderError(`DigitalOcean ${label} ${reason}`, 0, true);
    }
    if (response.status === 404 && options.allowNotFound) {
      await response.body?.cancel();
      return null;
    }
    if (!response.ok) throw await this.errorFrom(response, label);
    if (response.status === 204) return null;
    const text = await response.text();
    return (text ? JSON.parse(text) : null) as T;
  }

  private async errorFrom(response: Response, label: string): Promise<CloudProviderError> {
    let id: string | undefined;
    let detail: string | undefined;
    try {
      const body = (await response.json()) as { id?: unknown; message?: unknown };
      if (typeof body.id === 'string') id = body.id;
      // the token is removed before the message is cut: a token cut in half no scrubber finds
      if (typeof body.message === 'string') detail = scrubText(body.message, [this.config.token]).slice(0, 300);
    } catch {
      // a body that is not DigitalOcean's {id, message}: the status says enough
    }
    const text = `DigitalOcean ${label} answered ${response.status}${id ? ` ${id}` : ''}${detail ? `: ${detail}` : ''}`;
    const wait = retryAfterMs(response.headers, this.now());
    if (response.status === 429) return new CloudRateLimitError(text, wait ?? DEFAULT_RATE_LIMIT_WAIT_MS);
    const retryable = response.status >= 500 || response.status === 408;
    return new CloudProviderError(text, response.status, retryable, retryable ? wait : null, id);
  }

  async createDatabase(input: CreateDatabaseInput, options?: CallOptions): Promise<DatabaseCluster> {
    const body = {
      name: input.name,
      engine: input.engine,
      ...(input.version ? { version: input.version } : {}),
      region: input.region,
      size: input.size,
      num_nodes: input.numNodes,
      tags: input.tags,
    };
    const res = await this.call<{ database: DoDatabase }>('POST', '/v2/databases', 'POST /v2/databases', body, options);
    return toDatabase(answered(res, 'POST /v2/databases').database);
  }

  async getDatabase(id: string, options?: CallOptions): Promise<DatabaseCluster | null> {
    const res = await this.call<{ database: DoDatabase }>('GET', `/v2/databases/${encodeURIComponent(id)}`, `GET /v2/databases/${id}`, undefined, { ...options, allowNotFound: true });
    return res ? toDatabase(res.database) : null;
  }

  async listDatabasesByTag(tag: string, options?: CallOptions): Promise<DatabaseCluster[]> {
    const res = await this.call<{ databases: DoDatabase[] | null }>('GET', `/v2/databases?tag_name=${encodeURIComponent(tag)}`, 'GET /v2/databases?tag_name', undefined, options);
    return (res?.databases ?? []).map(toDatabase);
  }

  async deleteDatabase(id: string, options?: CallOptions): Promise<void> {
    await this.call('DELETE', `/v2/databases/${encodeURIComponent(id)}`, `DELETE /v2/databases/${id}`, undefined, { ...options, allowNotFound: true });
  }

  async createConnectionPool(databaseId: string, input: CreatePoolInput, options?: CallOptions): Promise<ConnectionPool> {
    const path = `/v2/databases/${encodeURIComponent(databaseId)}/pools`;
    const res = await this.call<{ pool: DoPool }>('POST', path, `POST /v2/databases/${databaseId}/pools`, { name: input.name, mode: input.mode, size: input.size, db: input.db, user: input.user }, options);
    return toPool(answered(res, `POST /v2/databases/${databaseId}/pools`).pool);
  }

  async getConnectionPool(databaseId: string, name: string, options?: CallOptions): Promise<ConnectionPool | null> {
    const path = `/v2/databases/${encodeURIComponent(databaseId)}/pools/${encodeURIComponent(name)}`;
    const res = await this.call<{ pool: DoPool }>('GET', path, `GET /v2/databases/${databaseId}/pools/${name}`, undefined, { ...options, allowNotFound: true });
    return res ? toPool(res.pool) : null;
  }

  async createDroplet(input: CreateDropletInput, options?: CallOptions): Promise<Droplet> {
    const body = {
      name: input.name,
      region: input.region,
      size: input.size,
      image: input.image,
      user_data: input.userData,
      tags: input.tags,
      ...(input.vpcUuid ? { vpc_uuid: input.vpcUuid } : {}),
    };
    const res = await this.call<{ droplet: DoDroplet }>('POST', '/v2/droplets', 'POST /v2/droplets', body, options);
    return toDroplet(answered(res, 'POST /v2/droplets').droplet);
  }

  async getDroplet(id: number, options?: CallOptions): Promise<Droplet | null> {
    const res = await this.call<{ droplet: DoDroplet }>('GET', `/v2/droplets/${id}`, `GET /v2/droplets/${id}`, undefined, { ...options, allowNotFound: true });
    return res ? toDroplet(res.droplet) : null;
  }

  async listDropletsByTag(tag: string, options?: CallOptions): Promise<Droplet[]> {
    const droplets: Droplet[] = [];
    for (let page = 1; page <= MAX_PAGES; page++) {
      const path = `/v2/droplets?tag_name=${encodeURIComponent(tag)}&per_page=${PAGE_SIZE}&page=${page}`;
      const res = await this.call<{ droplets: DoDroplet[] | null; links?: { pages?: { next?: string } } }>('GET', path, 'GET /v2/droplets?tag_name', undefined, options);
      droplets.push(...(res?.droplets ?? []).map(toDroplet));
      if (!res?.links?.pages?.next) break;
    }
    return droplets;
  }

  async deleteDroplet(id: number, options?: CallOptions): Promise<void> {
    await this.call('DELETE', `/v2/droplets/${id}`, `DELETE /v2/droplets/${id}`, undefined, { ...options, allowNotFound: true });
  }

  async deleteDropletsByTag(tag: string, options?: CallOptions): Promise<void> {
    await this.call('DELETE', `/v2/droplets?tag_name=${encodeURIComponent(tag)}`, 'DELETE /v2/droplets?tag_name', undefined, { ...options, allowNotFound: true });
  }
}
