import { randomBytes, randomUUID } from 'node:crypto';
import { parseBody, type SandboxProvider, type SandboxRequest, type SandboxResponse } from './server.ts';

/**
 * Sandbox DigitalOcean: the v2 endpoints the CloudProvider adapter calls, with DigitalOcean's
 * shapes ({database}, {pool}, {droplet}, {id, message} errors, 201/202/204), realistic state
 * transitions (a database is `creating` until it has been read N times, then `online`; a droplet
 * is `new`, without addresses, until read N times, then `active` with a public and a private IPv4),
 * and injectable faults. The Kubernetes API of the droplets is here too: GET /kube/<ip>/version
 * answers once the control endpoint says that node was bootstrapped.
 *
 * Control (under /_sandbox/digitalocean/):
 *   POST /faults        {method?, path, status, count?, retryAfter?, afterEffect?} (or an array):
 *                       the next `count` matching calls answer `status`; `path` is exact or ends
 *                       with `*` (prefix); `afterEffect` performs the call first (a response lost
 *                       after the provider acted). 429s carry Retry-After and ratelimit-* headers.
 *   POST /faults/clear
 *   POST /config        {databaseReadsUntilOnline?, dropletReadsUntilActive?}
 *   POST /bootstrap     {ip}: that node's Kubernetes API answers from now on
 *   GET  /state         live databases (with pool names) and droplets
 *
 * A misbehaving provider, for the secret-scrubbing tests: creating a database or droplet in
 * region `ech4` answers 422 and in `ech5` answers 503, each error message quoting the request's
 * Authorization header (as a proxy or a provider's debug mode might). Keyed by the request, not
 * by state, so test files sharing the sandbox cannot consume each other's faults.
 */

interface Fault {
  method?: string;
  path: string;
  status: number;
  count: number;
  retryAfter?: number;
  afterEffect?: boolean;
}

interface SandboxDatabase {
  id: string;
  name: string;
  engine: string;
  version: string;
  num_nodes: number;
  size: string;
  region: string;
  tags: string[];
  created_at: string;
  password: string;
  host: string;
  reads: number;
  pools: Map<string, { name: string; mode: string; size: number; db: string; user: string }>;
}

interface SandboxDroplet {
  id: number;
  name: string;
  region: string;
  size_slug: string;
  image: string | number;
  tags: string[];
  user_data: string | null;
  created_at: string;
  reads: number;
  publicIp: string;
  privateIp: string;
}

const NOT_FOUND = { id: 'not_found', message: 'The resource you were accessing could not be found.' };
const MAX_USER_DATA_BYTES = 64 * 1024;
const POOL_MODES = ['session', 'transaction', 'statement'];

function json(status: number, body?: unknown, headers?: Record<string, string>): SandboxResponse {
  return { status, body, headers };
}

/** See the header: region ech4/ech5 answers an error quoting the Authorization header. */
function echoingError(req: SandboxRequest): SandboxResponse | undefined {
  const region = (parseBody(req) as { region?: unknown } | null)?.region;
  if (region !== 'ech4' && region !== 'ech5') return undefined;
  const message = `request with authorization "${req.headers.authorization}" refused: region ${region} is unavailable`;
  return region === 'ech4' ? json(422, { id: 'unprocessable_entity', message }) : json(503, { id: 'service_unavailable', message });
}

function unprocessable(message: string): SandboxResponse {
  return json(422, { id: 'unprocessable_entity', message });
}

export function digitalOceanSandbox(): SandboxProvider {
  const databases = new Map<string, SandboxDatabase>();
  const droplets = new Map<number, SandboxDroplet>();
  const bootstrapped = new Set<string>();
  let faults: Fault[] = [];
  let config = { databaseReadsUntilOnline: 2, dropletReadsUntilActive: 2 };
  let nextDropletId = 3_164_444;
  let nextAddress = 1;

  const dbStatus = (d: SandboxDatabase) => (d.reads >= config.databaseReadsUntilOnline ? 'online' : 'creating');
  const dropletStatus = (d: SandboxDroplet) => (d.reads >= config.dropletReadsUntilActive ? 'active' : 'new');

  function connection(d: SandboxDatabase, opts: { port: number; database: string; private: boolean }) {
    const host = opts.private ? `private-${d.host}` : d.host;
    return {
      uri: `postgresql://doadmin:${d.password}@${host}:${opts.port}/${opts.database}?sslmode=require`,
      database: opts.database,
      host,
      port: opts.port,
      user: 'doadmin',
      password: d.password,
      ssl: true,
    };
  }

  function databaseBody(d: SandboxDatabase) {
    const online = dbStatus(d) === 'online';
    return {
      id: d.id,
      name: d.name,
      engine: d.engine,
      version: d.version,
      num_nodes: d.num_nodes,
      size: d.size,
      region: d.region,
      status: dbStatus(d),
      created_at: d.created_at,
      tags: d.tags,
      db_names: ['defaultdb'],
      connection: connection(d, { port: 25060, database: 'defaultdb', private: false }),
      private_connection: connection(d, { port: 25060, database: 'defaultdb', private: true }),
      users: online ? [{ name: 'doadmin', role: 'primary', password: d.password }] : null,
      maintenance_window: null,
    };
  }

  function poolBody(d: SandboxDatabase, p: { name: string; mode: string; size: number; db: string; user: string }) {
    return {
      ...p,
      connection: connection(d, { port: 25061, database: p.name, private: false }),
      private_connection: connection(d, { port: 25061, database: p.name, private: true }),
    };
  }

  function dropletBody(d: SandboxDroplet) {
    const active = dropletStatus(d) === 'active';
    return {
      id: d.id,
      name: d.name,
      memory: 4096,
      vcpus: 2,
      disk: 80,
      locked: false,
      status: dropletStatus(d),
      created_at: d.created_at,
      features: ['private_networking'],
      backup_ids: [],
      snapshot_ids: [],
      image: typeof d.image === 'number' ? { id: d.image, name: 'talos', distribution: 'Unknown', public: false } : { slug: d.image, public: true },
      volume_ids: [],
      size_slug: d.size_slug,
      networks: {
        v4: active
          ? [
              { ip_address: d.publicIp, netmask: '255.255.255.0', gateway: '203.0.113.254', type: 'public' },
              { ip_address: d.privateIp, netmask: '255.255.0.0', gateway: '10.10.0.1', type: 'private' },
            ]
          : [],
        v6: [],
      },
      region: { slug: d.region, name: d.region, available: true },
      tags: d.tags,
      vpc_uuid: '760e09ef-dc84-11e8-981e-3cfdfeaae000',
    };
  }

  /** A read moves the resource along its life cycle (time passes between polls). */
  const readDatabase = (d: SandboxDatabase) => {
    d.reads++;
    return databaseBody(d);
  };
  const readDroplet = (d: SandboxDroplet) => {
    d.reads++;
    return dropletBody(d);
  };

  function takeFault(req: SandboxRequest): Fault | undefined {
    const fault = faults.find(
      (f) => f.count > 0 && (!f.method || f.method.toUpperCase() === req.method) && (f.path.endsWith('*') ? req.path.startsWith(f.path.slice(0, -1)) : req.path === f.path),
    );
    if (fault) fault.count--;
    return fault;
  }

  function faultResponse(fault: Fault): SandboxResponse {
    if (fault.status === 429) {
      const headers: Record<string, string> = { 'ratelimit-limit': '5000', 'ratelimit-remaining': '0', 'ratelimit-reset': String(Math.ceil(Date.now() / 1000) + 60) };
      if (fault.retryAfter !== undefined) headers['retry-after'] = String(fault.retryAfter);
      return json(429, { id: 'too_many_requests', message: 'API Rate limit exceeded.' }, headers);
    }
    const headers: Record<string, string> = fault.retryAfter !== undefined ? { 'retry-after': String(fault.retryAfter) } : {};
    return json(fault.status, { id: fault.status >= 500 ? 'server_error' : 'error', message: `sandbox fault ${fault.status}` }, headers);
  }

  function handleDatabases(req: SandboxRequest, parts: string[]): SandboxResponse | undefined {
    const [id, sub, poolName] = parts;
    if (!id) {
      if (req.method === 'GET') {
        const tag = req.query.get('tag_name');
        const list = [...databases.values()].filter((d) => !tag || d.tags.includes(tag)).map(readDatabase);
        return json(200, { databases: list });
      }
      if (req.method === 'POST') {
        const body = (parseBody(req) ?? {}) as Record<string, unknown>;
        for (const field of ['name', 'engine', 'region', 'size', 'num_nodes']) {
          if (body[field] === undefined || body[field] === '') return unprocessable(`${field} is required`);
        }
        const name = String(body.name);
        if (!/^[a-z0-9][a-z0-9-]{1,62}$/.test(name)) return unprocessable('name must be 3-63 lowercase letters, digits and dashes');
        if ([...databases.values()].some((d) => d.name === name)) return unprocessable(`cluster name ${name} is not available`);
        const d: SandboxDatabase = {
          id: randomUUID(),
          name,
          engine: String(body.engine),
          version: typeof body.version === 'string' ? body.version : '17',
          num_nodes: Number(body.num_nodes),
          size: String(body.size),
          region: String(body.region),
          tags: Array.isArray(body.tags) ? body.tags.map(String) : [],
          created_at: new Date().toISOString(),
          password: `AVNS_${randomBytes(12).toString('base64url')}`,
          host: `${name}-do-user-1-0.f.db.ondigitalocean.com`,
          reads: 0,
          pools: new Map(),
        };
        databases.set(d.id, d);
        return json(201, { database: databaseBody(d) });
      }
      return undefined;
    }
    const d = databases.get(id);
    if (!sub) {
      if (req.method === 'GET') return d ? json(200, { database: readDatabase(d) }) : json(404, NOT_FOUND);
      if (req.method === 'DELETE') {
        if (!d) return json(404, NOT_FOUND);
        databases.delete(id);
        return json(204);
      }
      return undefined;
    }
    if (sub !== 'pools') return undefined;
    if (!d) return json(404, NOT_FOUND);
    if (!poolName) {
      if (req.method === 'GET') return json(200, { pools: [...d.pools.values()].map((p) => poolBody(d, p)) });
      if (req.method === 'POST') {
        if (dbStatus(d) !== 'online') return unprocessable('the database cluster is not online yet');
        const body = (parseBody(req) ?? {}) as Record<string, unknown>;
        for (const field of ['name', 'mode', 'size', 'db']) {
          if (body[field] === undefined || body[field] === '') return unprocessable(`${field} is required`);
        }
        const name = String(body.name);
        if (name.length < 3 || name.length > 60) return unprocessable('name must be between 3 and 60 characters');
        if (!POOL_MODES.includes(String(body.mode))) return unprocessable(`mode must be one of ${POOL_MODES.join(', ')}`);
        if (d.pools.has(name)) return unprocessable(`a connection pool named ${name} already exists`);
        const pool = { name, mode: String(body.mode), size: Number(body.size), db: String(body.db), user: typeof body.user === 'string' ? body.user : 'doadmin' };
        d.pools.set(name, pool);
        return json(201, { pool: poolBody(d, pool) });
      }
      return undefined;
    }
    const pool = d.pools.get(decodeURIComponent(poolName));
    if (req.method === 'GET') return pool ? json(200, { pool: poolBody(d, pool) }) : json(404, NOT_FOUND);
    if (req.method === 'DELETE') {
      if (!pool) return json(404, NOT_FOUND);
      d.pools.delete(pool.name);
      return json(204);
    }
    return undefined;
  }

  function handleDroplets(req: SandboxRequest, parts: string[]): SandboxResponse | undefined {
    const [idText] = parts;
    if (!idText) {
      const tag = req.query.get('tag_name');
      if (req.method === 'GET') {
        const perPage = Math.min(200, Math.max(1, Number(req.query.get('per_page') ?? 20)));
        const page = Math.max(1, Number(req.query.get('page') ?? 1));
        const all = [...droplets.values()].filter((d) => !tag || d.tags.includes(tag));
        const slice = all.slice((page - 1) * perPage, page * perPage).map(readDroplet);
        const next = page * perPage < all.length ? `https://api.digitalocean.com/v2/droplets?page=${page + 1}&per_page=${perPage}` : undefined;
        return json(200, { droplets: slice, links: { pages: next ? { next } : {} }, meta: { total: all.length } });
      }
      if (req.method === 'DELETE') {
        if (!tag) return unprocessable('tag_name is required');
        for (const d of [...droplets.values()]) if (d.tags.includes(tag)) droplets.delete(d.id);
        return json(204);
      }
      if (req.method === 'POST') {
        const body = (parseBody(req) ?? {}) as Record<string, unknown>;
        for (const field of ['name', 'region', 'size', 'image']) {
          if (body[field] === undefined || body[field] === '') return unprocessable(`${field} is required`);
        }
        const userData = typeof body.user_data === 'string' ? body.user_data : null;
        if (userData && new TextEncoder().encode(userData).length > MAX_USER_DATA_BYTES) return unprocessable('user_data may not exceed 64 KiB');
        const n = nextAddress++;
        const d: SandboxDroplet = {
          id: nextDropletId++,
          name: String(body.name),
          region: String(body.region),
          size_slug: String(body.size),
          image: body.image as string | number,
          tags: Array.isArray(body.tags) ? body.tags.map(String) : [],
          user_data: userData,
          created_at: new Date().toISOString(),
          reads: 0,
          publicIp: `203.0.113.${(n % 250) + 1}`,
          privateIp: `10.10.${Math.floor(n / 250)}.${(n % 250) + 2}`,
        };
        droplets.set(d.id, d);
        return json(202, { droplet: dropletBody(d), links: { actions: [{ id: d.id * 10, rel: 'create', href: `https://api.digitalocean.com/v2/actions/${d.id * 10}` }] } });
      }
      return undefined;
    }
    const d = droplets.get(Number(idText));
    if (req.method === 'GET') return d ? json(200, { droplet: readDroplet(d) }) : json(404, NOT_FOUND);
    if (req.method === 'DELETE') {
      if (!d) return json(404, NOT_FOUND);
      droplets.delete(d.id);
      return json(204);
    }
    return undefined;
  }

  function handleKube(req: SandboxRequest, parts: string[]): SandboxResponse | undefined {
    const [ip, what] = parts;
    if (req.method !== 'GET' || what !== 'version' || !ip) return undefined;
    const node = [...droplets.values()].find((d) => d.publicIp === ip && dropletStatus(d) === 'active');
    if (!node || !bootstrapped.has(ip)) return { status: 503, body: 'connection refused' };
    return json(200, { major: '1', minor: '32', gitVersion: 'v1.32.3', gitCommit: '32cc146f75aad04beaaa245a7157eb35063a9f99', platform: 'linux/amd64' });
  }

  return {
    name: 'digitalocean',
    handle(req) {
      const segments = req.path.split('/').filter(Boolean);
      const isApi = segments[0] === 'v2' && (segments[1] === 'databases' || segments[1] === 'droplets');
      const isKube = segments[0] === 'kube';
      if (!isApi && !isKube) return undefined;
      if (isApi && !/^Bearer \S+/.test(req.headers.authorization ?? '')) {
        return json(401, { id: 'unauthorized', message: 'Unable to authenticate you.' });
      }
      const echo = isApi && req.method === 'POST' && segments.length === 2 ? echoingError(req) : undefined;
      if (echo) return echo;
      const fault = takeFault(req);
      if (fault && !fault.afterEffect) return faultResponse(fault);
      const answer = isKube ? handleKube(req, segments.slice(1)) : segments[1] === 'databases' ? handleDatabases(req, segments.slice(2)) : handleDroplets(req, segments.slice(2));
      if (fault) return faultResponse(fault);
      return answer ?? json(405, { id: 'method_not_allowed', message: `${req.method} ${req.path} is not supported` });
    },
    control(path, req) {
      const body = (parseBody(req) ?? {}) as Record<string, unknown>;
      if (path === '/faults' && req.method === 'POST') {
        const list = (Array.isArray(body) ? body : [body]) as Partial<Fault>[];
        for (const f of list) {
          if (typeof f.path !== 'string' || typeof f.status !== 'number') return json(400, { error: 'a fault needs path and status' });
          faults.push({ method: f.method, path: f.path, status: f.status, count: f.count ?? 1, retryAfter: f.retryAfter, afterEffect: f.afterEffect === true });
        }
        return json(200, { faults });
      }
      if (path === '/faults/clear' && req.method === 'POST') {
        faults = [];
        return json(200, { ok: true });
      }
      if (path === '/config' && req.method === 'POST') {
        config = { ...config, ...(body as Partial<typeof config>) };
        return json(200, { config });
      }
      if (path === '/bootstrap' && req.method === 'POST') {
        if (typeof body.ip !== 'string') return json(400, { error: 'ip is required' });
        bootstrapped.add(body.ip);
        return json(200, { ok: true });
      }
      if (path === '/state' && req.method === 'GET') {
        return json(200, {
          databases: [...databases.values()].map((d) => ({ id: d.id, name: d.name, status: dbStatus(d), region: d.region, size: d.size, tags: d.tags, pools: [...d.pools.keys()] })),
          droplets: [...droplets.values()].map((d) => ({ id: d.id, name: d.name, status: dropletStatus(d), region: d.region, size: d.size_slug, tags: d.tags, publicIpv4: d.publicIp, privateIpv4: d.privateIp })),
          bootstrapped: [...bootstrapped],
          faults: faults.filter((f) => f.count > 0),
        });
      }
      return json(404, { error: `no sandbox control ${req.method} /_sandbox/digitalocean${path}` });
    },
    reset() {
      databases.clear();
      droplets.clear();
      bootstrapped.clear();
      faults = [];
      config = { databaseReadsUntilOnline: 2, dropletReadsUntilActive: 2 };
    },
  };
}
