import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineJobType, done, enqueue, getJob, JobRegistry, runSteps } from '../../queue/index.ts';
import { enqueueProvisionDb, provisionDbJobType, PROVISION_DB, type ProvisionDbRequest } from '../../functions/platform/provisioning/provision-db.ts';
import { DIGITALOCEAN_RATE_LIMIT } from '../../functions/platform/provisioning/job-type.ts';
import { provisionClusterJobType, PROVISION_CLUSTER } from '../../functions/platform/provisioning/provision-cluster.ts';
import { databaseTag } from '../../functions/platform/provisioning/resources.ts';
import { generateEncryptionKey, parseKeyRing, type KeyRing } from '../../functions/lib/secrets.ts';
import { unbuilt } from '../../functions/platform/lazy.ts';
import { seedAccount } from '../support/tenancy.ts';
import { isTerminal, provisioningRunner, provisioningTestContext, tickUntil } from './provision-support.ts';

/**
 * DigitalOcean's 429 is a limit on the whole API token: the provisioning types share the rate key
 * `provider:digitalocean`, and one 429 pauses it for every DigitalOcean job until Retry-After,
 * without spending their attempts, while jobs of other keys keep running.
 */

const t = provisioningTestContext();
let ring: KeyRing;
let otherRuns = 0;

/** A job behind another provider's key: it must not notice DigitalOcean's pause. */
const otherProvider = defineJobType({
  type: 'other_provider_call',
  payload: z.object({}),
  rateLimit: { key: 'provider:other', limit: 100, per: '1m' },
  async run() {
    otherRuns++;
    return done();
  },
});

const dbType = () => provisionDbJobType({ cloud: t.cloud, keyRing: ring, pollIntervalMs: 10_000 });
const runner = () => provisioningRunner(t.db.sql, [dbType(), otherProvider], t.clock, t.logs);

beforeAll(async () => {
  ring = await parseKeyRing(`test2030:${generateEncryptionKey()}`);
  // The registry sync stores each type's rate key, which enqueue then gives the type's jobs.
  const cluster = provisionClusterJobType({ cloud: t.cloud, probe: unbuilt('the probe'), machineConfigs: unbuilt('the machine configs'), talosImage: 1 });
  await new JobRegistry([dbType(), cluster, otherProvider]).sync(t.db.sql);
});

async function request(name: string): Promise<ProvisionDbRequest> {
  const accountId = `acct-${randomUUID().slice(0, 8)}`;
  const serviceId = `svc-${randomUUID().slice(0, 8)}`;
  await seedAccount(t.db.sql, accountId);
  await t.db.sql`insert into platform.services (id, account_id, desired_state) values (${serviceId}, ${accountId}, '{}'::jsonb)`;
  return { accountId, serviceId, name, size: 'db-s-1vcpu-1gb', region: 'nyc3' };
}

const enqueued = async (name: string) => (await enqueueProvisionDb(t.db.sql, await request(name), { now: t.clock.now() })).job.id;
const eventsOf = async (id: string) => (await getJob(t.db.sql, id))!.events;
const createCalls = (jobId: string) => t.control.callsMentioning(databaseTag(jobId), 'POST', '/v2/databases');

describe('DigitalOcean rate limit', () => {
  it('both provisioning types declare the provider:digitalocean key, and their jobs carry it', async () => {
    const rows = await t.db.sql`select type, rate_key from worker.job_types where type in (${PROVISION_DB}, ${PROVISION_CLUSTER}) order by type`;
    expect(rows.map((r) => [r.type, r.rate_key])).toEqual([
      [PROVISION_CLUSTER, 'provider:digitalocean'],
      [PROVISION_DB, 'provider:digitalocean'],
    ]);
    const [limit] = await t.db.sql`select max_starts, per_ms::int as per_ms from worker.rate_limits where key = 'provider:digitalocean'`;
    expect(limit).toMatchObject({ max_starts: DIGITALOCEAN_RATE_LIMIT.limit, per_ms: 60_000 });
  });

  it('one 429 pauses every DigitalOcean job until Retry-After, spends no attempt, and other keys keep running', async () => {
    await t.control.fault({ method: 'POST', path: '/v2/databases', status: 429, count: 1, retryAfter: 30 });
    const first = await enqueued('limited-a');
    const limitedAt = t.clock.now();
    await runSteps(runner());

    const paused = (await getJob(t.db.sql, first))!.job;
    expect(paused).toMatchObject({ status: 'queued', step: 'start', attempts: 0 });
    expect(paused.runAt.getTime() - limitedAt.getTime()).toBe(30_000);
    const [key] = await t.db.sql`select paused_until from worker.rate_limits where key = 'provider:digitalocean'`;
    expect((key!.paused_until as Date).getTime()).toBe(limitedAt.getTime() + 30_000);
    const released = (await eventsOf(first)).find((e) => e.kind === 'lease_released');
    expect(released?.detail).toMatchObject({ rateKey: 'provider:digitalocean' });
    expect(createCalls(first)).toHaveLength(1); // the 429
    const [row] = await t.db.sql`select rate_key from worker.jobs where id = ${first}`;
    expect(row!.rate_key).toBe('provider:digitalocean');

    // A second DigitalOcean job, due now, waits behind the paused key; another key's job runs.
    const second = await enqueued('limited-b');
    const other = (await enqueue(t.db.sql, { type: otherProvider.type, payload: {} }, { now: t.clock.now() })).job.id;
    for (const step of [1_000, 28_000]) {
      t.clock.advance(step);
      await runSteps(runner());
      expect((await getJob(t.db.sql, second))!.job).toMatchObject({ status: 'queued', step: 'start', attempts: 0 });
      expect((await eventsOf(second)).some((e) => e.kind === 'claimed')).toBe(false);
      expect(createCalls(second)).toHaveLength(0);
    }
    expect((await getJob(t.db.sql, other))!.job.status).toBe('done');
    expect(otherRuns).toBe(1);

    // At Retry-After both resume, and both get their databases.
    t.clock.advance(1_000);
    await runSteps(runner());
    expect(createCalls(first)).toHaveLength(2);
    expect(createCalls(second)).toHaveLength(1);
    for (const id of [first, second]) {
      const job = await tickUntil(runner(), t.clock, id, isTerminal);
      expect(job.status).toBe('done');
      const events = await eventsOf(id);
      expect(events.some((e) => e.kind === 'retry')).toBe(false);
    }
    expect(createCalls(first)).toHaveLength(2);
  });

  it('a 429 with only ratelimit-reset pauses the key until that reset', async () => {
    await t.db.sql`update worker.rate_limits set paused_until = null, pause_reason = null where key = 'provider:digitalocean'`;
    const resetAt = Math.ceil(Date.now() / 1000) + 60; // the sandbox's reset: a minute from its own clock
    await t.control.fault({ method: 'POST', path: '/v2/databases', status: 429, count: 1 });
    const id = await enqueued('limited-reset');
    await runSteps(runner());
    const [key] = await t.db.sql`select paused_until from worker.rate_limits where key = 'provider:digitalocean'`;
    const pausedFor = (key!.paused_until as Date).getTime() - t.clock.now().getTime();
    // The adapter reads the reset against the wall clock: the wait is about the minute left.
    expect(pausedFor).toBeGreaterThan(50_000);
    expect(pausedFor).toBeLessThanOrEqual(resetAt * 1000 - Date.now() + 1_000);
    expect((await getJob(t.db.sql, id))!.job).toMatchObject({ status: 'queued', attempts: 0 });
    t.clock.advance(pausedFor);
    expect((await tickUntil(runner(), t.clock, id, isTerminal)).status).toBe('done');
  });
});
