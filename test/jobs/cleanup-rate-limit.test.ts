import { beforeAll, describe, expect, it } from 'vitest';
import { cleanupJob, type AccountLogObjects, type CloudInventory, type CloudResource } from '../../functions/platform/cleanup/cleanup.ts';
import { DIGITALOCEAN_RATE_LIMIT } from '../../functions/platform/provisioning/job-type.ts';
import { CloudRateLimitError } from '../../functions/platform/provisioning/ports/cloud-provider.ts';
import { enqueue, getJob, JobRegistry, runSteps } from '../../queue/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';

/**
 * The cleanup job lists and deletes on DigitalOcean with the provisioning types' token, so it
 * shares their rate key: a 429 in its inventory pauses `provider:digitalocean` for every
 * DigitalOcean job until Retry-After and gives the cleanup's attempt back (its own file: the
 * synced key would rate-limit the other cleanup tests' many steps at one pinned instant).
 */

const NOW = new Date('2026-12-10T12:00:00Z');

/** A cloud whose first `limited` listings answer DigitalOcean's 429; it records each listing. */
class RateLimitedCloud implements CloudInventory {
  listings = 0;
  constructor(private limited: number) {}
  async listTagged(): Promise<CloudResource[]> {
    this.listings++;
    if (this.limited > 0) {
      this.limited--;
      throw new CloudRateLimitError('DigitalOcean GET /v2/droplets: 429 too_many_requests', 30_000);
    }
    return [];
  }
  async delete() {}
}

const noLogs: AccountLogObjects = { list: async () => [], delete: async () => {} };

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});

describe('cleanup behind a DigitalOcean 429', () => {
  it('pauses provider:digitalocean until Retry-After, spends no attempt, and finishes after it', async () => {
    const cloud = new RateLimitedCloud(1);
    const registry = new JobRegistry([cleanupJob({ inventory: cloud, logs: noLogs })]);
    await registry.sync(db.sql); // stores the type's rate key, which enqueue gives its jobs
    const { job } = await enqueue(db.sql, { type: 'cleanup', payload: { sweep: 'orphaned_resources' } as never }, { now: NOW });
    expect((await db.sql`select rate_key from worker.jobs where id = ${job.id}`)[0]!.rate_key).toBe(DIGITALOCEAN_RATE_LIMIT.key);

    const run = (at: Date) => runSteps({ sql: db.sql, registry, workerId: 'cleanup-rate-test', clock: () => at });
    await run(NOW);
    const paused = (await getJob(db.sql, job.id))!;
    expect(paused.job).toMatchObject({ status: 'queued', attempts: 0 });
    expect(paused.job.runAt.getTime()).toBe(NOW.getTime() + 30_000);
    expect(paused.events.find((e) => e.kind === 'lease_released')?.detail).toMatchObject({ rateKey: DIGITALOCEAN_RATE_LIMIT.key });
    const [key] = await db.sql`select paused_until from worker.rate_limits where key = ${DIGITALOCEAN_RATE_LIMIT.key}`;
    expect((key!.paused_until as Date).getTime()).toBe(NOW.getTime() + 30_000);

    await run(new Date(NOW.getTime() + 29_999)); // still paused: not claimed
    expect(cloud.listings).toBe(1);
    await run(new Date(NOW.getTime() + 30_000));
    const finished = (await getJob(db.sql, job.id))!;
    expect(finished.job).toMatchObject({ status: 'done', attempts: 1 }); // the one try that got through
    expect(finished.events.some((e) => e.kind === 'retry')).toBe(false);
    expect(cloud.listings).toBe(2);
  });
});
