import { beforeAll, describe, expect, it } from 'vitest';
import { DigitalOceanCloudProvider, retryAfterMs } from '../../functions/platform/provisioning/adapters/digitalocean.ts';
import { cloudInventory } from '../../functions/platform/cleanup/adapters/cloud-inventory.ts';
import { CloudProviderError, CloudRateLimitError } from '../../functions/platform/provisioning/ports/cloud-provider.ts';
import type { SandboxHandle } from '../../sandbox/server.ts';
import { createTestSandbox } from '../support/sandbox.ts';
import { digitalOceanAdapter, digitalOceanControl } from './provision-support.ts';

let sandbox: SandboxHandle;
let cloud: DigitalOceanCloudProvider;
let control: ReturnType<typeof digitalOceanControl>;

beforeAll(async () => {
  sandbox = await createTestSandbox();
  cloud = digitalOceanAdapter(sandbox);
  control = digitalOceanControl(sandbox);
});

describe('DigitalOcean adapter against the sandbox', () => {
  it('sends DigitalOcean field names and reads its shapes back', async () => {
    const created = await cloud.createDatabase({ name: 'shape-check', engine: 'pg', version: '17', region: 'ams3', size: 'db-s-1vcpu-1gb', numNodes: 1, tags: ['starbase', 'shape'] });
    expect(created).toEqual({ id: expect.any(String), name: 'shape-check', engine: 'pg', status: 'creating', region: 'ams3', size: 'db-s-1vcpu-1gb', tags: ['starbase', 'shape'], createdAt: expect.any(String) });
    const post = sandbox.calls('digitalocean').find((c) => c.method === 'POST' && c.path === '/v2/databases')!;
    expect(post.body).toEqual({ name: 'shape-check', engine: 'pg', version: '17', region: 'ams3', size: 'db-s-1vcpu-1gb', num_nodes: 1, tags: ['starbase', 'shape'] });
    expect(post.headers).not.toHaveProperty('authorization'); // the sandbox never records credentials

    // A pool needs an online cluster: 422 until then, which no retry can fix.
    const early = await cloud.createConnectionPool(created.id, { name: 'app-pool', mode: 'transaction', size: 10, db: 'defaultdb', user: 'doadmin' }).catch((e: unknown) => e);
    expect(early).toBeInstanceOf(CloudProviderError);
    expect(early).toMatchObject({ status: 422, retryable: false });
    expect((await cloud.getDatabase(created.id))!.status).toBe('creating');
    expect((await cloud.getDatabase(created.id))!.status).toBe('online'); // the sandbox's default: online at the second read
    const pool = await cloud.createConnectionPool(created.id, { name: 'app-pool', mode: 'transaction', size: 10, db: 'defaultdb', user: 'doadmin' });
    expect(pool).toMatchObject({ name: 'app-pool', mode: 'transaction', size: 10, db: 'defaultdb', user: 'doadmin' });
    expect(JSON.stringify(pool)).not.toContain('AVNS_'); // the connection strings are Secrets
    expect(pool.uri!.reveal()).toMatch(/^postgresql:\/\/doadmin:AVNS_.+@shape-check-.+:25061\/app-pool\?sslmode=require$/);
    expect(pool.privateUri!.reveal()).toMatch(/@private-shape-check-/);
    expect((await cloud.listDatabasesByTag('shape')).map((d) => d.id)).toEqual([created.id]);

    await cloud.deleteDatabase(created.id);
    await cloud.deleteDatabase(created.id); // gone already: not an error
    expect(await cloud.getDatabase(created.id)).toBeNull();
    expect(await cloud.getConnectionPool(created.id, 'app-pool')).toBeNull();
  });

  it('creates droplets with user_data and tags, reports addresses once active, pages through a tag, deletes by tag', async () => {
    const droplet = await cloud.createDroplet({ name: 'node-1', region: 'fra1', size: 's-2vcpu-4gb', image: 123, userData: 'version: v1alpha1\n', tags: ['paged'] });
    expect(droplet).toMatchObject({ name: 'node-1', status: 'new', publicIpv4: null, privateIpv4: null, tags: ['paged'] });
    const post = sandbox.calls('digitalocean').find((c) => c.method === 'POST' && c.path === '/v2/droplets')!;
    expect(post.body).toEqual({ name: 'node-1', region: 'fra1', size: 's-2vcpu-4gb', image: 123, user_data: 'version: v1alpha1\n', tags: ['paged'] });
    await cloud.getDroplet(droplet.id);
    const active = (await cloud.getDroplet(droplet.id))!;
    expect(active.status).toBe('active');
    expect(active.publicIpv4).toMatch(/^203\.0\.113\.\d+$/);
    expect(active.privateIpv4).toMatch(/^10\.10\./);

    for (let i = 2; i <= 205; i++) await cloud.createDroplet({ name: `node-${i}`, region: 'fra1', size: 's-1vcpu-1gb', image: 123, userData: '', tags: ['paged'] });
    const listed = await cloud.listDropletsByTag('paged');
    expect(listed).toHaveLength(205);
    expect(new Set(listed.map((d) => d.id)).size).toBe(205);
    expect(sandbox.calls('digitalocean').filter((c) => c.method === 'GET' && c.path === '/v2/droplets').map((c) => c.query)).toEqual([
      '?tag_name=paged&per_page=200&page=1',
      '?tag_name=paged&per_page=200&page=2',
    ]);
    await cloud.deleteDroplet(droplet.id);
    await cloud.deleteDroplet(droplet.id);
    expect(await cloud.getDroplet(droplet.id)).toBeNull();
    await cloud.deleteDropletsByTag('paged');
    expect(await cloud.listDropletsByTag('paged')).toEqual([]);
  });

  it('turns a 429 into a CloudRateLimitError carrying the wait, and 5xx into a retryable error', async () => {
    await control.fault({ method: 'GET', path: '/v2/droplets/*', status: 429, count: 1, retryAfter: 12 });
    const limited = await cloud.getDroplet(1).catch((e: unknown) => e);
    expect(limited).toBeInstanceOf(CloudRateLimitError);
    expect(limited).toMatchObject({ status: 429, retryable: true, retryAfterMs: 12_000, message: 'DigitalOcean GET /v2/droplets/1 answered 429 too_many_requests: API Rate limit exceeded.' });

    await control.fault({ method: 'GET', path: '/v2/droplets/*', status: 429, count: 1 }); // ratelimit-reset only
    const byReset = (await cloud.getDroplet(1).catch((e: unknown) => e)) as CloudRateLimitError;
    expect(byReset.retryAfterMs).toBeGreaterThan(55_000);
    expect(byReset.retryAfterMs).toBeLessThanOrEqual(61_000);

    await control.fault({ method: 'GET', path: '/v2/droplets/*', status: 503, count: 1 });
    const unavailable = await cloud.getDroplet(1).catch((e: unknown) => e);
    expect(unavailable).toMatchObject({ status: 503, retryable: true, retryAfterMs: null });
    expect(unavailable).not.toBeInstanceOf(CloudRateLimitError);
  });

  it('reads Retry-After as seconds or a date, and falls back to ratelimit-reset', () => {
    const now = Date.parse('2030-01-01T00:00:00Z');
    expect(retryAfterMs(new Headers({ 'retry-after': '3' }), now)).toBe(3_000);
    expect(retryAfterMs(new Headers({ 'retry-after': 'Tue, 01 Jan 2030 00:00:20 GMT' }), now)).toBe(20_000);
    expect(retryAfterMs(new Headers({ 'ratelimit-reset': String(now / 1000 + 42) }), now)).toBe(42_000);
    expect(retryAfterMs(new Headers({ 'ratelimit-reset': String(now / 1000 - 5) }), now)).toBe(0);
    expect(retryAfterMs(new Headers({ 'retry-after': '999999' }), now)).toBe(3_600_000);
    expect(retryAfterMs(new Headers(), now)).toBeNull();
  });

  it('reports an unreachable API and a timeout as retryable, and passes our own abort through', async () => {
    const unreachable = new DigitalOceanCloudProvider({ token: 't', baseUrl: 'http://127.0.0.1:1' });
    expect(await unreachable.getDroplet(1).catch((e: unknown) => e)).toMatchObject({ status: 0, retryable: true });

    const hanging: typeof fetch = (_input, init) => new Promise((_resolve, reject) => init!.signal!.addEventListener('abort', () => reject(init!.signal!.reason)));
    const slow = new DigitalOceanCloudProvider({ token: 't', fetch: hanging, timeoutMs: 20 });
    const timedOut = (await slow.getDroplet(1).catch((e: unknown) => e)) as CloudProviderError;
    expect(timedOut).toMatchObject({ status: 0, retryable: true });
    expect(timedOut.message).toMatch(/timed out/);

    const stop = new AbortController();
    const pending = new DigitalOceanCloudProvider({ token: 't', fetch: hanging }).getDroplet(1, { signal: stop.signal }).catch((e: unknown) => e);
    stop.abort(new Error('lease lost'));
    const aborted = await pending;
    expect(aborted).not.toBeInstanceOf(CloudProviderError);
    expect((aborted as Error).message).toBe('lease lost');
  });

  it('the sandbox refuses calls without a bearer token, as DigitalOcean does', async () => {
    const res = await fetch(`${sandbox.url}/v2/droplets`);
    expect(res.status).toBe(401);
    expect(await res.json()).toEqual({ id: 'unauthorized', message: 'Unable to authenticate you.' });
    expect(() => new DigitalOceanCloudProvider({ token: '' })).toThrow(/DIGITALOCEAN_TOKEN/);
  });
});

describe('cloud inventory for the cleanup sweep', () => {
  it('lists databases and droplets carrying a tag with their creation times, and deletes each kind', async () => {
    const inventory = cloudInventory(cloud);
    const database = await cloud.createDatabase({ name: 'inventory-db', engine: 'pg', region: 'ams3', size: 'db-s-1vcpu-1gb', numNodes: 1, tags: ['starbase', 'inv'] });
    const droplet = await cloud.createDroplet({ name: 'inventory-node', region: 'ams3', size: 's-1vcpu-1gb', image: 1, userData: '', tags: ['starbase', 'inv'] });
    await cloud.createDroplet({ name: 'someone-elses', region: 'ams3', size: 's-1vcpu-1gb', image: 1, userData: '', tags: ['other'] });
    const listed = await inventory.listTagged('inv');
    expect(listed.map((r) => [r.type, r.id, r.name])).toEqual([
      ['database', database.id, 'inventory-db'],
      ['droplet', String(droplet.id), 'inventory-node'],
    ]);
    expect(listed.every((r) => r.createdAt instanceof Date && Date.now() - r.createdAt.getTime() < 60_000)).toBe(true);
    for (const resource of listed) await inventory.delete(resource);
    for (const resource of listed) await inventory.delete(resource); // gone already: not an error
    expect(await inventory.listTagged('inv')).toEqual([]);
    expect((await cloud.listDropletsByTag('other')).map((d) => d.name)).toEqual(['someone-elses']);
  });
});
