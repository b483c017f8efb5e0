import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { SpacesClient } from '../../functions/adapters/spaces-client.ts';
import { SpacesLogArchive } from '../../functions/platform/build/adapters/spaces-log-archive.ts';
import { R2AccountLogObjects } from '../../functions/platform/cleanup/adapters/r2-account-logs.ts';
import { SpacesAccountLogObjects } from '../../functions/platform/cleanup/adapters/spaces-account-logs.ts';
import { cleanupJob } from '../../functions/platform/cleanup/cleanup.ts';
import type { AccountLogObjects } from '../../functions/platform/cleanup/ports/account-log-objects.ts';
import { enqueue, JobRegistry, runSteps } from '../../queue/index.ts';
import type { SandboxHandle } from '../../sandbox/server.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { createTestSandbox } from '../support/sandbox.ts';
import { sandboxSpaces, spacesObjects } from '../support/spaces.ts';
import { seedAccount, seedService } from '../support/tenancy.ts';

/**
 * The account's build-log objects the purge deletes, in either store: found through its services'
 * build jobs (real Postgres), oldest build first. In R2 the bucket is a recorder of the keys it is
 * asked to delete; in Spaces the objects are really deleted from the sandbox over SigV4-signed
 * DeleteObject calls.
 */

let db: TestDatabase;
let sandbox: SandboxHandle;
const at = (minute: number) => new Date(Date.UTC(2026, 11, 1, 12, minute));
const jobs: Record<string, string> = {};

class RecordingBucket {
  readonly deleted: (string | string[])[] = [];
  async delete(keys: string | string[]) {
    this.deleted.push(keys);
  }
}

beforeAll(async () => {
  db = await createTestDatabase();
  sandbox = await createTestSandbox();
  await db.sql`insert into worker.job_types (type) values ('build'), ('other') on conflict do nothing`;
  for (const account of ['acct-logs-a', 'acct-logs-b', 'acct-logs-empty']) await seedAccount(db.sql, account);
  await seedService(db.sql, 'svc-a1', 'acct-logs-a');
  await seedService(db.sql, 'svc-a2', 'acct-logs-a');
  await seedService(db.sql, 'svc-b1', 'acct-logs-b');
  const builds: [string, string, string, number][] = [
    ['b-a2', 'build', 'svc-a2', 1],
    ['b-a1', 'build', 'svc-a1', 2],
    ['b-b1', 'build', 'svc-b1', 0],
    ['other-a1', 'other', 'svc-a1', 3],
  ];
  for (const [name, type, serviceId, minute] of builds) {
    jobs[name] = (await enqueue(db.sql, { type, payload: { serviceId } }, { now: at(minute) })).job.id;
  }
});

const stores: [string, () => AccountLogObjects][] = [
  ['R2', () => new R2AccountLogObjects(db.sql, new RecordingBucket())],
  ['Spaces', () => new SpacesAccountLogObjects(db.sql, new SpacesClient(sandboxSpaces(sandbox.url)))],
];

describe.each(stores)('account log objects in %s', (_name, make) => {
  it("lists the archive keys of the account's build jobs, oldest first, up to the limit", async () => {
    const logs = make();
    expect(await logs.list('acct-logs-a', 10)).toEqual([`builds/${jobs['b-a2']}.log`, `builds/${jobs['b-a1']}.log`]);
    expect(await logs.list('acct-logs-a', 1)).toEqual([`builds/${jobs['b-a2']}.log`]);
    expect(await logs.list('acct-logs-b', 10)).toEqual([`builds/${jobs['b-b1']}.log`]);
    expect(await logs.list('acct-logs-empty', 10)).toEqual([]);
    expect(await logs.list('acct-logs-unknown', 10)).toEqual([]);
  });
});

describe('deleting', () => {
  it('R2: deletes the keys it is given in one call, and asks the bucket nothing for none', async () => {
    const bucket = new RecordingBucket();
    const logs = new R2AccountLogObjects(db.sql, bucket);
    await logs.delete([]);
    await logs.delete(['builds/x.log', 'builds/y.log']);
    expect(bucket.deleted).toEqual([['builds/x.log', 'builds/y.log']]);
  });

  it('Spaces: deletes the objects of the keys it is given, a key with no object included, and no other', async () => {
    const settings = sandboxSpaces(sandbox.url);
    const archive = new SpacesLogArchive(new SpacesClient(settings));
    for (const id of ['x', 'y', 'z']) await archive.append(id, [{ seq: 1, text: `log of ${id}` }]);
    await new SpacesAccountLogObjects(db.sql, new SpacesClient(settings)).delete(['builds/x.log', 'builds/y.log', 'builds/gone.log']);
    expect((await spacesObjects(sandbox.url, settings.bucket)).map((o) => o.key).filter((k) => k.startsWith('builds/'))).toEqual(['builds/z.log']);
  });
});

describe('the cleanup purge with build logs in Spaces', () => {
  it("deletes a cancelled account's build-log objects from the bucket and leaves other accounts' logs", async () => {
    const now = new Date('2026-12-10T12:00:00Z');
    await db.sql`insert into platform.plans (id, name, monthly_price_cents, included_credit_cents) values ('starter', 'Starter', 2000, 500) on conflict do nothing`;
    await db.sql`insert into platform.billing_runs (period, job_id, accounts, invoiced, no_charge, failed, total_cents, started_at, finished_at)
                 values ('2026-10', ${randomUUID()}, 1, 1, 0, 0, 0, '2026-11-01', '2026-11-01') on conflict do nothing`;
    await db.sql`select platform.create_account('acct-purged', 'starter', 'cus_purged', '2026-01-01'::timestamptz)`;
    await db.sql`update platform.accounts set status = 'cancelled', cancelled_at = '2026-10-20T00:00:00Z' where id = 'acct-purged'`;
    await seedService(db.sql, 'svc-purged', 'acct-purged');
    const purgedBuilds = [];
    for (const minute of [4, 5]) purgedBuilds.push((await enqueue(db.sql, { type: 'build', payload: { serviceId: 'svc-purged' } }, { now: at(minute) })).job.id);

    const settings = sandboxSpaces(sandbox.url);
    const archive = new SpacesLogArchive(new SpacesClient(settings));
    for (const id of [...purgedBuilds, jobs['b-b1']!]) await archive.append(id, [{ seq: 1, text: `log of ${id}` }]);
    const logKeys = async () => (await spacesObjects(sandbox.url, settings.bucket)).map((o) => o.key).filter((k) => k.startsWith('builds/')).sort();
    expect(await logKeys()).toHaveLength(3);

    const inventory = { listTagged: async () => [], delete: async () => {} };
    const registry = new JobRegistry([cleanupJob({ inventory, logs: new SpacesAccountLogObjects(db.sql, new SpacesClient(settings)) })]);
    const { job } = await enqueue(db.sql, { type: 'cleanup', payload: { sweep: 'purge_cancelled' } }, { now });
    await runSteps({ sql: db.sql, registry, workerId: 'purge-spaces-test', clock: () => now });
    const [row] = await db.sql`select status, last_error from worker.jobs where id = ${job.id}`;
    expect(row, String(row?.last_error)).toMatchObject({ status: 'done' });
    expect(await logKeys()).toEqual([`builds/${jobs['b-b1']}.log`]);
    const [audit] = await db.sql`select detail from platform.cleanup_actions where job_id = ${job.id} and action = 'delete_log_objects'`;
    expect((audit!.detail as { keys: string[] }).keys.sort()).toEqual(purgedBuilds.map((id) => `builds/${id}.log`).sort());
  });
});
