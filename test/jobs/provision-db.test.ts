import { seedAccount } from '../support/tenancy.ts';
import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { cancelJob, ConflictError, enqueue, getJob, JobRegistry, ValidationError } from '../../queue/index.ts';
import {
  databaseSecretContext,
  enqueueProvisionDb,
  provisionDbJobType,
  provisionDbRequest,
  type DesiredDatabase,
  type ProvisionDbRequest,
} from '../../functions/platform/provisioning/provision-db.ts';
import { databaseClusterName, databasePoolName, databaseTag } from '../../functions/platform/provisioning/resources.ts';
import { decryptSecret, generateEncryptionKey, parseKeyRing, type KeyRing } from '../../functions/lib/secrets.ts';
import type { CloudProvider } from '../../functions/platform/provisioning/ports/cloud-provider.ts';
import {
  crashingCloud,
  databaseDump,
  isTerminal,
  provisioningTestContext,
  provisioningRunner,
  runUntilCrash,
  tickUntil,
} from './provision-support.ts';

const t = provisioningTestContext();
let ring: KeyRing;

const POLL_MS = 10_000;
const typesWith = (c: CloudProvider) => [provisionDbJobType({ cloud: c, keyRing: ring, pollIntervalMs: POLL_MS })];
const runner = () => provisioningRunner(t.db.sql, typesWith(t.cloud), t.clock, t.logs);

beforeAll(async () => {
  ring = await parseKeyRing(`test2030:${generateEncryptionKey()}`);
});

/** A fresh account and service for each test, so tests never share a concurrency key or a name. */
async function request(overrides: Partial<ProvisionDbRequest> = {}): Promise<ProvisionDbRequest> {
  const accountId = `acct-${randomUUID().slice(0, 8)}`;
  const serviceId = `svc-${randomUUID().slice(0, 8)}`;
  await seedAccount(t.db.sql, accountId);
  await t.db.sql`insert into platform.services (id, account_id, desired_state) values (${serviceId}, ${accountId}, ${t.db.sql.json({ image: 'registry.example/app:1' })})`;
  return { accountId, serviceId, name: 'main', size: 'db-s-1vcpu-1gb', region: 'nyc3', ...overrides };
}

async function enqueued(req: ProvisionDbRequest): Promise<string> {
  return (await enqueueProvisionDb(t.db.sql, req, { now: t.clock.now() })).job.id;
}

async function liveDatabasesOf(jobId: string) {
  return (await t.control.state()).databases.filter((d) => d.tags.includes(databaseTag(jobId)));
}

async function desiredEntry(serviceId: string, name: string): Promise<DesiredDatabase | undefined> {
  const [row] = await t.db.sql`select desired_state from platform.services where id = ${serviceId}`;
  return (row!.desired_state as { databases?: Record<string, DesiredDatabase> }).databases?.[name];
}

/** The plaintext connection string, asked of the provider directly (the job never stores it). */
async function plaintextUri(databaseId: string, name: string): Promise<string> {
  return (await t.cloud.getConnectionPool(databaseId, databasePoolName(name)))!.uri!.reveal();
}

describe('provision_db', () => {
  it('provisions by ticks: create → wait_online → pool, and writes the sealed connection string into desired state', async () => {
    const req = await request();
    await new JobRegistry(typesWith(t.cloud)).sync(t.db.sql);
    const jobId = await enqueued(req);
    // the manual's infra SLA: 4 h from the request, at the P1 severity (the type's, once synced as a
    // deployment syncs its types before it takes a request)
    const { job: queued } = (await getJob(t.db.sql, jobId))!;
    expect(queued.deadlineSeverity).toBe('critical');
    expect(queued.deadlineAt!.getTime() - queued.createdAt.getTime()).toBe(4 * 3_600_000);
    const job = await tickUntil(runner(), t.clock, jobId, isTerminal);
    expect(job).toMatchObject({ status: 'done', step: 'pool' });
    const databases = await liveDatabasesOf(jobId);
    expect(databases).toHaveLength(1);
    expect(databases[0]).toMatchObject({ name: databaseClusterName('main', jobId), status: 'online', pools: ['main-pool'] });
    expect(job.result).toEqual({ serviceId: req.serviceId, name: 'main', databaseId: databases[0]!.id, poolName: 'main-pool', status: 'online' });

    const entry = (await desiredEntry(req.serviceId, 'main'))!;
    expect(entry).toMatchObject({ kid: 'test2030', poolName: 'main-pool', poolMode: 'transaction', provider: 'digitalocean', databaseId: databases[0]!.id, jobId });
    const uri = await plaintextUri(databases[0]!.id, 'main');
    expect(uri).toMatch(/^postgresql:\/\/doadmin:AVNS_[^@]+@.+:25061\/main-pool\?sslmode=require$/);
    expect(await decryptSecret(entry, ring, { context: databaseSecretContext(req.serviceId, 'main') })).toBe(uri);
    // The rest of the desired state is untouched, and the entry only opens in its own place.
    const [svc] = await t.db.sql`select desired_state from platform.services where id = ${req.serviceId}`;
    expect((svc!.desired_state as { image: string }).image).toBe('registry.example/app:1');
    await expect(decryptSecret(entry, ring, { context: databaseSecretContext('another-service', 'main') })).rejects.toThrow();

    const [row] = await t.db.sql`select status, provider_id, pool_name, provider_tag from platform.databases where job_id = ${jobId}`;
    expect(row).toEqual({ status: 'online', provider_id: databases[0]!.id, pool_name: 'main-pool', provider_tag: databaseTag(jobId) });
    const { events } = (await getJob(t.db.sql, jobId))!;
    expect(events.filter((e) => e.kind === 'checkpoint').map((e) => e.detail.step)).toEqual(['wait_online', 'wait_online', 'pool']);
    expect(events.some((e) => e.kind === 'retry' || e.kind === 'failed')).toBe(false);
  });

  it('resumes after a crash right after each provider call without creating anything twice', async () => {
    // First count the provider calls of a clean run.
    const counting = crashingCloud(t.cloud, Number.POSITIVE_INFINITY, async () => {});
    const probeJob = await enqueued(await request({ name: 'counted' }));
    await tickUntil(provisioningRunner(t.db.sql, typesWith(counting.cloud), t.clock, t.logs), t.clock, probeJob, isTerminal);
    const total = counting.calls();
    expect(total).toBeGreaterThanOrEqual(6); // list, create, get × n, get pool, create pool

    for (let crashAt = 1; crashAt <= total; crashAt++) {
      const req = await request({ name: `crash${crashAt}` });
      const jobId = await enqueued(req);
      await runUntilCrash(t.db, typesWith, t.cloud, crashAt, t.clock, jobId, t.logs);
      const crashed = (await getJob(t.db.sql, jobId))!.job;
      expect(crashed.status).toBe('running'); // nothing settled: only the lease can tell
      t.clock.advance(300_000 + 1_000);
      const job = await tickUntil(runner(), t.clock, jobId, isTerminal);
      expect(job.status, `crash after call ${crashAt}`).toBe('done');
      expect(job.crashes).toBe(1);

      const databases = await liveDatabasesOf(jobId);
      expect(databases, `crash after call ${crashAt}`).toHaveLength(1);
      expect(databases[0]!.pools).toEqual([`crash${crashAt}-pool`]);
      expect(t.control.callsMentioning(databaseTag(jobId), 'POST', '/v2/databases')).toHaveLength(1);
      const poolPosts = t.sandbox.calls('digitalocean').filter((c) => c.method === 'POST' && c.path === `/v2/databases/${databases[0]!.id}/pools`);
      expect(poolPosts, `crash after call ${crashAt}`).toHaveLength(1);
      const entry = (await desiredEntry(req.serviceId, req.name))!;
      expect(await decryptSecret(entry, ring, { context: databaseSecretContext(req.serviceId, req.name) })).toBe(await plaintextUri(databases[0]!.id, req.name));
    }
  });

  it('honours a 429 with Retry-After by pausing the DigitalOcean key, without using up an attempt', async () => {
    await t.control.fault({ method: 'POST', path: '/v2/databases', status: 429, count: 1, retryAfter: 7 });
    const req = await request({ name: 'ratelimited' });
    const jobId = await enqueued(req);
    const before = t.clock.now();
    await tickUntil(runner(), t.clock, jobId, () => true);
    const waiting = (await getJob(t.db.sql, jobId))!.job;
    expect(waiting).toMatchObject({ status: 'queued', step: 'start', attempts: 0 });
    expect(waiting.runAt.getTime() - before.getTime()).toBe(7_000);
    // not a provider retry: the rate key is paused (test/jobs/provision-rate-limit.test.ts)
    expect(waiting.checkpoint.providerRetry).toBeUndefined();
    expect((await getJob(t.db.sql, jobId))!.events.find((e) => e.kind === 'lease_released')?.detail).toMatchObject({ rateKey: 'provider:digitalocean' });
    expect(await liveDatabasesOf(jobId)).toHaveLength(0);

    t.clock.advance(6_000); // not due yet
    await tickUntil(runner(), t.clock, jobId, () => true, { maxTicks: 1 });
    expect((await getJob(t.db.sql, jobId))!.job.step).toBe('start');
    t.clock.advance(1_000);
    const job = await tickUntil(runner(), t.clock, jobId, isTerminal);
    expect(job.status).toBe('done');
    expect(job.checkpoint.providerRetry ?? null).toBeNull();
    expect(await liveDatabasesOf(jobId)).toHaveLength(1);
    const { events } = (await getJob(t.db.sql, jobId))!;
    expect(events.some((e) => e.kind === 'retry')).toBe(false);
  });

  it('backs off on 5xx, and a 500 answered after DigitalOcean acted does not create a second database', async () => {
    await t.control.fault(
      { method: 'POST', path: '/v2/databases', status: 500, count: 1, afterEffect: true },
      { method: 'GET', path: '/v2/databases/*', status: 503, count: 2 },
    );
    const req = await request({ name: 'flaky' });
    const jobId = await enqueued(req);
    await tickUntil(runner(), t.clock, jobId, () => true);
    const first = (await getJob(t.db.sql, jobId))!.job;
    expect(first.checkpoint.providerRetry).toMatchObject({ step: 'start', count: 1, status: 500 });
    expect(await liveDatabasesOf(jobId)).toHaveLength(1); // it exists although the answer was an error

    const job = await tickUntil(runner(), t.clock, jobId, isTerminal);
    expect(job.status).toBe('done');
    expect(await liveDatabasesOf(jobId)).toHaveLength(1);
    expect(t.control.callsMentioning(databaseTag(jobId), 'POST', '/v2/databases')).toHaveLength(1);
    // Both 503s were answered and polled again as delayed steps, not as engine retries.
    const [database] = await liveDatabasesOf(jobId);
    expect(t.sandbox.calls('digitalocean').filter((c) => c.method === 'GET' && c.path === `/v2/databases/${database!.id}`).length).toBeGreaterThanOrEqual(3);
    const { events } = (await getJob(t.db.sql, jobId))!;
    expect(events.filter((e) => e.kind === 'checkpoint' && e.detail.step === 'wait_online')).toHaveLength(3);
    expect(events.some((e) => e.kind === 'retry')).toBe(false);
  });

  it('fails after persistent 5xx and its compensation deletes the database', async () => {
    await t.control.fault({ method: 'GET', path: '/v2/databases/*', status: 500, count: 1_000 });
    const req = await request({ name: 'doomed' });
    const jobId = await enqueued(req);
    const job = await tickUntil(runner(), t.clock, jobId, isTerminal, { advanceMs: 10 * 60_000, maxTicks: 40 });
    expect(job.status).toBe('failed');
    expect(job.lastError).toMatch(/DigitalOcean GET \/v2\/databases\/[0-9a-f-]+ answered 500/);
    expect(await liveDatabasesOf(jobId)).toHaveLength(0);
    expect(t.sandbox.calls('digitalocean').filter((c) => c.method === 'DELETE' && c.path.startsWith('/v2/databases/'))).not.toHaveLength(0);
    const [row] = await t.db.sql`select status from platform.databases where job_id = ${jobId}`;
    expect(row!.status).toBe('destroyed');
    expect(await desiredEntry(req.serviceId, 'doomed')).toBeUndefined();
    const [alert] = await t.db.sql`select kind from worker.alerts where job_id = ${jobId}`;
    expect(alert!.kind).toBe('poison_job');
  });

  it('fails at once on a request DigitalOcean rejects (422): retrying cannot help', async () => {
    const req = await request({ name: 'rejected' });
    await t.control.fault({ method: 'POST', path: '/v2/databases', status: 422, count: 1 });
    const jobId = await enqueued(req);
    const job = await tickUntil(runner(), t.clock, jobId, isTerminal);
    expect(job).toMatchObject({ status: 'failed', attempts: 1 });
    expect(job.lastError).toMatch(/answered 422/);
  });

  it('cancel while waiting for the database deletes it', async () => {
    const req = await request({ name: 'cancelled' });
    const jobId = await enqueued(req);
    await tickUntil(runner(), t.clock, jobId, (j) => j.step === 'wait_online');
    expect(await liveDatabasesOf(jobId)).toHaveLength(1);
    await cancelJob(t.db.sql, jobId, 'customer changed their mind', { now: t.clock.now() });
    const job = await tickUntil(runner(), t.clock, jobId, isTerminal);
    expect(job.status).toBe('cancelled');
    expect(await liveDatabasesOf(jobId)).toHaveLength(0);
    const [row] = await t.db.sql`select status from platform.databases where job_id = ${jobId}`;
    expect(row!.status).toBe('destroyed');
    const { events } = (await getJob(t.db.sql, jobId))!;
    expect(events.at(-1)).toMatchObject({ kind: 'cancelled', detail: { hookRan: true } });
  });

  it('fails and cleans up when the service is deleted while its database is provisioned', async () => {
    const req = await request({ name: 'orphaned' });
    const jobId = await enqueued(req);
    await tickUntil(runner(), t.clock, jobId, (j) => j.step === 'wait_online');
    await t.db.sql`delete from platform.services where id = ${req.serviceId}`;
    const job = await tickUntil(runner(), t.clock, jobId, isTerminal);
    expect(job.status).toBe('failed');
    expect(job.lastError).toMatch(/refused: no service /);
    expect(await liveDatabasesOf(jobId)).toHaveLength(0);
  });

  it('enqueue checks the service and refuses a second live database of the same name', async () => {
    const req = await request({ name: 'unique' });
    await expect(enqueueProvisionDb(t.db.sql, { ...req, serviceId: 'no-such-service' })).rejects.toMatchObject({ status: 404, field: 'serviceId' });
    await expect(enqueueProvisionDb(t.db.sql, { ...req, accountId: 'someone-else' })).rejects.toMatchObject({ status: 404, field: 'accountId' });
    await seedAccount(t.db.sql, 'someone-else');
    await expect(enqueueProvisionDb(t.db.sql, { ...req, accountId: 'someone-else' })).rejects.toMatchObject({ status: 403, field: 'accountId' });
    const jobId = await enqueued(req);
    await tickUntil(runner(), t.clock, jobId, isTerminal);
    await expect(enqueueProvisionDb(t.db.sql, req)).rejects.toBeInstanceOf(ConflictError);

    // A job enqueued around the check (plain SQL, say) fails on its own, without touching the provider.
    const { job: dup } = await enqueue(t.db.sql, { type: 'provision_db', payload: req }, { now: t.clock.now() });
    const failed = await tickUntil(runner(), t.clock, dup.id, isTerminal);
    expect(failed).toMatchObject({ status: 'failed' });
    expect(failed.lastError).toMatch(/already has a database unique/);
    expect(await liveDatabasesOf(dup.id)).toHaveLength(0);
  });

  it('validates the request body, naming the bad field', () => {
    const ok = { accountId: 'a', serviceId: 's', name: 'main', size: 'db-s-1vcpu-1gb', region: 'nyc3' };
    expect(provisionDbRequest.safeParse(ok).success).toBe(true);
    for (const [field, value] of [['name', 'Main DB'], ['size', 's-1vcpu-1gb'], ['region', 'NYC'], ['accountId', '']] as const) {
      const result = provisionDbRequest.safeParse({ ...ok, [field]: value });
      expect(result.success).toBe(false);
      expect(result.error!.issues[0]!.path).toEqual([field]);
    }
    expect(provisionDbRequest.safeParse({ ...ok, extra: 1 }).success).toBe(false);
  });
  // Last in the file, so the dump holds every job above: happy, crashed, rate-limited, failed, cancelled.
  it('never writes a plaintext connection string to any table or log line', async () => {
    const req = await request({ name: 'secretcheck' });
    const jobId = await enqueued(req);
    await tickUntil(runner(), t.clock, jobId, isTerminal);
    const state = await t.control.state();
    const uris: string[] = [];
    for (const database of state.databases) {
      for (const pool of database.pools) uris.push((await t.cloud.getConnectionPool(database.id, pool))!.uri!.reveal());
    }
    expect(uris.length).toBeGreaterThanOrEqual(10);
    const passwords = uris.map((uri) => decodeURIComponent(new URL(uri).password));
    expect(passwords.every((p) => p.length > 10)).toBe(true);

    const dump = await databaseDump(t.db.sql);
    expect(dump).toContain(jobId); // the dump does hold the jobs' rows
    expect(dump).toContain('"ct"');
    const logText = JSON.stringify(t.logs);
    expect(t.logs.some((l) => l.jobId === jobId)).toBe(true);
    for (const [i, password] of passwords.entries()) {
      expect(dump.includes(password), `password of ${uris[i]!.split('@')[1]} in the database`).toBe(false);
      expect(logText.includes(password), 'a password in the log lines').toBe(false);
    }
  });
});
