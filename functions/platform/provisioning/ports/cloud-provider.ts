/**
 * The cloud the provisioning jobs drive (DigitalOcean in production, the sandbox in tests and
 * `npm start`): managed Postgres clusters with connection pools, and droplets. Plain data in and
 * out; no HTTP, Cloudflare or provider SDK types.
 *
 * Nothing here is idempotent at the provider, so callers make it so: every resource is created
 * with a tag derived from the job that owns it, and a step looks its resources up by tag before
 * creating any (see `listDatabasesByTag`, `listDropletsByTag`). Deletes are idempotent: deleting
 * what is already gone is not an error.
 */
import type { Secret } from '../../../lib/secrets.ts';

export interface CallOptions {
  signal?: AbortSignal;
}

export type DatabaseStatus = 'creating' | 'online' | 'resizing' | 'migrating' | 'forking' | (string & {});

/** A managed database cluster. Deliberately without its admin credentials: the jobs never need them. */
export interface DatabaseCluster {
  id: string;
  name: string;
  engine: string;
  status: DatabaseStatus;
  region: string;
  size: string;
  tags: string[];
  /** When the provider created it (ISO 8601), if it says. */
  createdAt: string | null;
}

export interface CreateDatabaseInput {
  name: string;
  engine: 'pg';
  /** Engine major version, e.g. "17"; the provider's default when absent. */
  version?: string;
  region: string;
  /** Node size slug, e.g. db-s-1vcpu-1gb. */
  size: string;
  numNodes: number;
  tags: string[];
}

export type PoolMode = 'transaction' | 'session' | 'statement';

export interface CreatePoolInput {
  name: string;
  mode: PoolMode;
  /** PgBouncer backend connections. */
  size: number;
  /** The database the pool connects to. */
  db: string;
  /** The user the pool connects as. */
  user: string;
}

export interface ConnectionPool {
  name: string;
  mode: string;
  size: number;
  db: string;
  user: string;
  /** The pool's connection string (with its password): a Secret, so it cannot be logged or serialized by accident. */
  uri: Secret | null;
  /** The same over the region's private network, when the provider gives one. */
  privateUri: Secret | null;
}

export type DropletStatus = 'new' | 'active' | 'off' | 'archive' | (string & {});

export interface Droplet {
  id: number;
  name: string;
  status: DropletStatus;
  tags: string[];
  publicIpv4: string | null;
  privateIpv4: string | null;
  /** When the provider created it (ISO 8601), if it says. */
  createdAt: string | null;
}

export interface CreateDropletInput {
  name: string;
  region: string;
  /** Droplet size slug, e.g. s-2vcpu-4gb. */
  size: string;
  /** Image slug or id (a Talos custom image id for cluster nodes). */
  image: string | number;
  /** First-boot configuration (a Talos machine config); the provider caps it at 64 KiB. */
  userData: string;
  tags: string[];
  vpcUuid?: string;
}

export interface CloudProvider {
  createDatabase(input: CreateDatabaseInput, options?: CallOptions): Promise<DatabaseCluster>;
  /** null when there is no such cluster (it never existed or was deleted). */
  getDatabase(id: string, options?: CallOptions): Promise<DatabaseCluster | null>;
  listDatabasesByTag(tag: string, options?: CallOptions): Promise<DatabaseCluster[]>;
  deleteDatabase(id: string, options?: CallOptions): Promise<void>;
  createConnectionPool(databaseId: string, input: CreatePoolInput, options?: CallOptions): Promise<ConnectionPool>;
  /** null when the cluster has no pool of that name. */
  getConnectionPool(databaseId: string, name: string, options?: CallOptions): Promise<ConnectionPool | null>;

  createDroplet(input: CreateDropletInput, options?: CallOptions): Promise<Droplet>;
  getDroplet(id: number, options?: CallOptions): Promise<Droplet | null>;
  listDropletsByTag(tag: string, options?: CallOptions): Promise<Droplet[]>;
  deleteDroplet(id: number, options?: CallOptions): Promise<void>;
  /** Delete every droplet carrying the tag (one call). */
  deleteDropletsByTag(tag: string, options?: CallOptions): Promise<void>;
}

/**
 * A provider call failed. `retryable` says whether the same call may succeed later (rate limit,
 * 5xx, network); `retryAfterMs` is how long the provider asked us to wait, when it said. The
 * message names the call and the provider's error, never credentials or response secrets.
 */
export class CloudProviderError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly retryable: boolean,
    readonly retryAfterMs: number | null = null,
    readonly code?: string,
  ) {
    super(message);
    this.name = 'CloudProviderError';
  }
}

/**
 * 429: the provider's rate limit; `retryAfterMs` is always set (from Retry-After, or the limit's reset).
 * `rateLimited` is the engine's mark (queue/errors.ts isRateLimited): whichever job lets it escape a
 * step pauses its rate key until then, its attempt given back, instead of retrying by its policy.
 */
export class CloudRateLimitError extends CloudProviderError {
  declare readonly retryAfterMs: number;
  readonly rateLimited = true;
  constructor(message: string, retryAfterMs: number) {
    super(message, 429, true, retryAfterMs, 'too_many_requests');
    this.name = 'CloudRateLimitError';
  }
}
