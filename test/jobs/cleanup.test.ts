import { randomUUID } from 'node:crypto';
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { cleanupJob, type AccountLogObjects, type CleanupDeps, type CloudInventory, type CloudResource } from '../../functions/platform/cleanup/cleanup.ts';
import { claimJobs, enqueue, JobRegistry, rescueExpiredLeases, runSteps } from '../../queue/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';

/**
 * The cleanup sweeps against real Postgres. The cloud and the log store are the two small ports
 * the sweeps define; the fakes here hold resources and objects and record what they were asked.
 */

const NOW = new Date('2026-12-10T12:00:00Z');
const ago = (ms: number) => new Date(NOW.getTime() - ms);
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

class FakeCloud implements CloudInventory {
  readonly resources = new Map<string, CloudResource>();
  readonly deleted: string[] = [];
  add(type: string, id: string, tags: string[], createdAt = ago(DAY)) {
    this.resources.set(`${type}:${id}`, { type, id, name: `${type}-${id}`, tags, createdAt });
  }
  async listTagged(tag: string) {
    return [...this.resources.values()].filter((r) => r.tags.includes(tag));
  }
  async delete(r: Pick<CloudResource, 'type' | 'id'>) {
    this.deleted.push(`${r.type}:${r.id}`);
    this.resources.delete(`${r.type}:${r.id}`);
  }
}

class FakeLogs implements AccountLogObjects {
  readonly objects = new Map<string, string[]>();
  readonly deleted: string[] = [];
  async list(accountId: string, limit: number) {
    return (this.objects.get(accountId) ?? []).slice(0, limit);
  }
  async delete(keys: string[]) {
    this.deleted.push(...keys);
    for (const [account, list] of this.objects) this.objects.set(account, list.filter((k) => !keys.includes(k)));
  }
}

let db: TestDatabase;
let cloud: FakeCloud;
let logs: FakeLogs;

beforeAll(async () => {
  db = await createTestDatabase();
  await db.sql`insert into platform.plans (id, name, monthly_price_cents, included_credit_cents) values ('starter', 'Starter', 2000, 500)`;
});

beforeEach(() => {
  cloud = new FakeCloud();
  logs = new FakeLogs();
});

async function runCleanup(payload: Record<string, unknown>, deps: Partial<CleanupDeps> = {}) {
  const registry = new JobRegistry([cleanupJob({ inventory: cloud, logs, ...deps })]);
  const { job } = await enqueue(db.sql, { type: 'cleanup', payload: payload as never }, { now: NOW });
  await runSteps({ sql: db.sql, registry, workerId: 'cleanup-test', clock: () => NOW });
  const [row] = await db.sql`select status, result, last_error from worker.jobs where id = ${job.id}`;
  expect(row, String(row?.last_error)).toMatchObject({ status: 'done' });
  const audit = await db.sql`select sweep, action, target, detail from platform.cleanup_actions where job_id = ${job.id} order by id`;
  const [{ steps }] = (await db.sql`select count(*)::int as steps from worker.job_history where job_id = ${job.id} and kind = 'claimed'`) as unknown as [{ steps: number }];
  const result = row!.result as { dryRun: boolean; sweeps: { sweep: string; count: number; actions: { action: string; target: string }[] }[] };
  const sweep = (name: string) => result.sweeps.find((s) => s.sweep === name)!;
  return { id: job.id, result, sweep, audit, steps };
}

const targets = (r: Awaited<ReturnType<typeof runCleanup>>, sweep: string) => r.sweep(sweep).actions.map((a) => `${a.action} ${a.target}`);

async function account(id: string, fields: { status?: string; paymentFailedAt?: Date; cancelledAt?: Date } = {}) {
  await db.sql`select platform.create_account(${id}, 'starter', ${`cus_${id}`}, '2026-01-01'::timestamptz)`;
  await db.sql`update platform.accounts set status = ${fields.status ?? 'active'}, payment_failed_at = ${fields.paymentFailedAt ?? null},
                      cancelled_at = ${fields.cancelledAt ?? null} where id = ${id}`;
}

async function databaseRow(accountId: string, tag: string, status = 'online') {
  await db.sql`insert into platform.databases (job_id, account_id, service_id, name, region, size, provider_tag, status)
               values (${randomUUID()}, ${accountId}, ${`svc_${accountId}`}, ${`db-${tag}`}, 'fra1', 'db-s-1vcpu-1gb', ${tag}, ${status})`;
}

async function clusterRow(accountId: string, tag: string, status = 'active') {
  await db.sql`insert into platform.clusters (id, account_id, name, region, size, control_planes, workers, provider_tag, status)
               values (${randomUUID()}, ${accountId}, ${`cl-${tag}`}, 'fra1', 's-2vcpu-4gb', 1, 1, ${tag}, ${status})`;
}

/** Every row the sweeps could touch, for "nothing else changed" comparisons. */
async function platformState() {
  return {
    accounts: await db.sql`select * from platform.accounts order by id`,
    services: await db.sql`select * from platform.services order by id`,
    databases: await db.sql`select * from platform.databases order by provider_tag`,
    clusters: await db.sql`select * from platform.clusters order by provider_tag`,
    usage: await db.sql`select * from platform.usage_totals order by account_id, period, metric`,
    snapshots: await db.sql`select * from platform.database_size_snapshots order by id`,
    invoices: await db.sql`select * from platform.invoices order by id`,
    plans: await db.sql`select * from platform.account_plans order by account_id, from_period`,
    audit: await db.sql`select * from platform.cleanup_actions order by id`,
  };
}

describe('sweep: orphaned cloud resources', () => {
  beforeAll(async () => {
    await account('o_owner');
    await databaseRow('o_owner', 'starbase-db-live');
    await databaseRow('o_owner', 'starbase-db-destroyed', 'destroyed');
    await clusterRow('o_owner', 'starbase-cluster-live');
  });

  function seedCloud() {
    cloud.add('database', 'd-owned', ['starbase', 'starbase-db-live']);
    cloud.add('database', 'd-row-destroyed', ['starbase', 'starbase-db-destroyed']);
    cloud.add('database', 'd-no-row', ['starbase', 'starbase-db-unknown']);
    cloud.add('database', 'd-young', ['starbase', 'starbase-db-in-flight'], ago(HOUR)); // its row may not be written yet
    cloud.add('droplet', '101', ['starbase', 'starbase-cluster-live', 'starbase-role-worker']);
    cloud.add('droplet', '102', ['starbase', 'starbase-cluster-gone', 'starbase-role-worker']);
    cloud.add('droplet', '103', ['customer-own-tag']); // not ours
  }

  it('lists the orphans in a dry run and changes nothing', async () => {
    seedCloud();
    const before = await platformState();
    const run = await runCleanup({ sweep: 'orphaned_resources', dryRun: true });
    expect(run.result.dryRun).toBe(true);
    expect(targets(run, 'orphaned_resources').sort()).toEqual(['delete_resource database:d-no-row', 'delete_resource database:d-row-destroyed', 'delete_resource droplet:102']);
    expect(cloud.deleted).toEqual([]);
    expect(cloud.resources.size).toBe(7);
    expect(run.audit).toEqual([]);
    expect(await platformState()).toEqual(before);
  });

  it('deletes only resources tagged by us, older than the grace, that no live row owns; then finds nothing', async () => {
    seedCloud();
    const before = await platformState();
    const run = await runCleanup({ sweep: 'orphaned_resources' });
    expect(cloud.deleted.sort()).toEqual(['database:d-no-row', 'database:d-row-destroyed', 'droplet:102']);
    expect([...cloud.resources.keys()].sort()).toEqual(['database:d-owned', 'database:d-young', 'droplet:101', 'droplet:103']);
    expect(run.audit.map((a) => `${a.sweep} ${a.action} ${a.target}`).sort()).toEqual([
      'orphaned_resources delete_resource database:d-no-row',
      'orphaned_resources delete_resource database:d-row-destroyed',
      'orphaned_resources delete_resource droplet:102',
    ]);
    expect(run.sweep('orphaned_resources').count).toBe(3);
    const after = await platformState();
    expect({ ...after, audit: [] }).toEqual({ ...before, audit: [] }); // no platform row touched

    const again = await runCleanup({ sweep: 'orphaned_resources' });
    expect(again.sweep('orphaned_resources').count).toBe(0);
    expect(cloud.deleted).toHaveLength(3);
  });

  it('treats a row whose provisioning job the lease rescue ended (no compensation ran) as owning nothing', async () => {
    await account('o_stranded');
    // a provision job crashing at the top weight class: the rescue ends it oom_killed, no hook runs
    const { job: crashed } = await enqueue(db.sql, { type: 'provision_db', payload: {}, weight: 'heavy', priority: 0, runAt: ago(3 * HOUR) }, { now: ago(3 * HOUR) });
    const [claimed] = await claimJobs(db.sql, { workerId: 'crashing-runner', limit: 1, now: ago(3 * HOUR) });
    expect(claimed!.id).toBe(crashed.id);
    expect(await rescueExpiredLeases(db.sql, { now: ago(HOUR) })).toMatchObject({ oomKilled: 1 });
    await db.sql`insert into platform.databases (job_id, account_id, service_id, name, region, size, provider_tag, status)
                 values (${crashed.id}, 'o_stranded', 'svc_o_stranded', 'db-stranded', 'fra1', 'db-s-1vcpu-1gb', 'starbase-db-stranded', 'provisioning')`;
    // a provision job still on its way (queued for later) keeps its row an owner
    const { job: waiting } = await enqueue(db.sql, { type: 'provision_cluster', payload: {}, runAt: new Date(NOW.getTime() + DAY) }, { now: ago(HOUR) });
    await db.sql`insert into platform.clusters (id, account_id, name, region, size, control_planes, workers, provider_tag, status)
                 values (${waiting.id}, 'o_stranded', 'cl-waiting', 'fra1', 's-2vcpu-4gb', 1, 1, 'starbase-cluster-waiting', 'provisioning')`;
    cloud.add('database', 'd-stranded', ['starbase', 'starbase-db-stranded']);
    cloud.add('droplet', '201', ['starbase', 'starbase-cluster-waiting', 'starbase-role-control-plane']);
    const before = await platformState();

    const run = await runCleanup({ sweep: 'orphaned_resources' });
    expect(cloud.deleted).toEqual(['database:d-stranded']);
    expect([...cloud.resources.keys()]).toEqual(['droplet:201']);
    expect(targets(run, 'orphaned_resources')).toEqual(['delete_resource database:d-stranded']);
    expect({ ...(await platformState()), audit: [] }).toEqual({ ...before, audit: [] }); // no platform row touched
  });

  it('works through many orphans in bounded batches', async () => {
    for (let i = 0; i < 7; i++) cloud.add('droplet', `orphan-${i}`, ['starbase', `starbase-cluster-x${i}`]);
    const run = await runCleanup({ sweep: 'orphaned_resources' }, { batchSize: 3 });
    expect(cloud.deleted).toHaveLength(7);
    expect(run.steps).toBe(3); // 3 + 3 + 1
  });
});

describe('sweep: suspend the services of accounts whose payment failed', () => {
  beforeAll(async () => {
    await account('u_due', { status: 'payment_failed', paymentFailedAt: ago(8 * DAY) });
    await account('u_recent', { status: 'payment_failed', paymentFailedAt: ago(2 * DAY) });
    await account('u_active');
    await account('u_cancelled', { status: 'cancelled', cancelledAt: ago(2 * DAY), paymentFailedAt: ago(20 * DAY) });
    await db.sql`insert into platform.services (id, account_id, desired_state) values
                   ('u_due_web', 'u_due', '{"image": "r/web:7", "replicas": 2}'),
                   ('u_due_held', 'u_due', '{"image": "r/held:1", "suspended": true, "suspendedReason": "abuse"}'),
                   ('u_recent_web', 'u_recent', '{"image": "r/web:1"}'),
                   ('u_active_web', 'u_active', '{"image": "r/web:2"}'),
                   ('u_cancelled_web', 'u_cancelled', '{"image": "r/web:3"}')`;
  });

  it('lists what it would suspend in a dry run and changes nothing', async () => {
    const before = await platformState();
    const run = await runCleanup({ sweep: 'suspend_unpaid', dryRun: true });
    expect(targets(run, 'suspend_unpaid')).toEqual(['suspend_account account:u_due', 'suspend_service service:u_due_web']);
    expect(await platformState()).toEqual(before);
  });

  it('suspends accounts past the grace and their running services, nothing else; then finds nothing', async () => {
    const before = await platformState();
    const run = await runCleanup({ sweep: 'suspend_unpaid' });
    expect(targets(run, 'suspend_unpaid')).toEqual(['suspend_account account:u_due', 'suspend_service service:u_due_web']);
    expect(run.audit).toHaveLength(2);
    const after = await platformState();
    const changed = (rows: readonly Record<string, unknown>[], ids: string[]) => rows.filter((r) => !ids.includes(r.id as string));
    expect(changed(after.accounts, ['u_due'])).toEqual(changed(before.accounts, ['u_due']));
    expect(changed(after.services, ['u_due_web'])).toEqual(changed(before.services, ['u_due_web']));
    expect(after.accounts.find((a) => a.id === 'u_due')).toMatchObject({ status: 'suspended', suspended_at: NOW, payment_failed_at: ago(8 * DAY) });
    expect(after.services.find((s) => s.id === 'u_due_web')!.desired_state).toEqual({
      image: 'r/web:7',
      replicas: 2,
      suspended: true,
      suspendedReason: 'payment_failed',
      suspendedAt: NOW.toISOString(),
    });

    const again = await runCleanup({ sweep: 'suspend_unpaid' });
    expect(again.sweep('suspend_unpaid').count).toBe(0);
  });
});

describe('sweep: delete the data of accounts cancelled more than 30 days ago', () => {
  async function seedAccountData(id: string) {
    await databaseRow(id, `starbase-db-${id}-1`);
    await databaseRow(id, `starbase-db-${id}-2`, 'destroyed');
    await clusterRow(id, `starbase-cluster-${id}`);
    cloud.add('database', `${id}-db1`, ['starbase', `starbase-db-${id}-1`]);
    for (const n of [1, 2, 3]) cloud.add('droplet', `${id}-node${n}`, ['starbase', `starbase-cluster-${id}`]);
    logs.objects.set(id, [`builds/${id}-a.log`, `builds/${id}-b.log`, `builds/${id}-c.log`]);
    await db.sql`insert into platform.services (id, account_id, desired_state) values (${`${id}_web`}, ${id}, '{}'), (${`${id}_api`}, ${id}, '{}')`;
    await db.sql`insert into platform.usage_totals (account_id, period, metric, quantity, cents) values
                   (${id}, '2026-09', 'bandwidth_gb', 1, 8), (${id}, '2026-10', 'bandwidth_gb', 2, 16)`;
    await db.sql`insert into platform.database_size_snapshots (database_id, account_id, cents_per_hour, effective_from) values
                   (${`${id}-db1`}, ${id}, 2, '2026-09-01'), (${`${id}-db1`}, ${id}, 0, '2026-10-10')`;
    await db.sql`insert into platform.invoices (account_id, period, plan, lines, total_cents, currency, status) values (${id}, '2026-10', 'starter', '[]', 2016, 'usd', 'paid')`;
  }

  beforeAll(async () => {
    await db.sql`insert into platform.billing_runs (period, job_id, accounts, invoiced, no_charge, failed, total_cents, started_at, finished_at)
                 values ('2026-10', ${randomUUID()}, 1, 1, 0, 0, 2016, '2026-11-01', '2026-11-01')`;
    await account('c_old', { status: 'cancelled', cancelledAt: new Date('2026-10-20T00:00:00Z') }); // 51 days, October billed
    await account('c_recent', { status: 'cancelled', cancelledAt: new Date('2026-11-25T00:00:00Z') }); // 15 days
    await account('c_unbilled', { status: 'cancelled', cancelledAt: new Date('2026-09-15T00:00:00Z') }); // September never billed here
    await account('c_active');
  });

  beforeEach(async () => {
    for (const id of ['c_old', 'c_recent', 'c_unbilled', 'c_active']) {
      const [seeded] = await db.sql`select 1 from platform.services where account_id = ${id} limit 1`;
      if (!seeded) await seedAccountData(id);
      else {
        // the cloud and log fakes are fresh per test: put back what the rows say exists
        cloud.add('database', `${id}-db1`, ['starbase', `starbase-db-${id}-1`]);
        for (const n of [1, 2, 3]) cloud.add('droplet', `${id}-node${n}`, ['starbase', `starbase-cluster-${id}`]);
        logs.objects.set(id, [`builds/${id}-a.log`, `builds/${id}-b.log`, `builds/${id}-c.log`]);
      }
    }
  });

  it('lists the first batch in a dry run and changes nothing', async () => {
    const before = await platformState();
    const run = await runCleanup({ sweep: 'purge_cancelled', dryRun: true });
    expect(targets(run, 'purge_cancelled')).toEqual([
      'delete_resource database:c_old-db1',
      'delete_resource droplet:c_old-node1',
      'delete_resource droplet:c_old-node2',
      'delete_resource droplet:c_old-node3',
      'delete_log_objects account:c_old',
      'delete_rows account:c_old', // databases
      'delete_rows account:c_old', // clusters
      'delete_rows account:c_old', // services
      'delete_rows account:c_old', // usage
      'delete_rows account:c_old', // snapshots
      'mark_purged account:c_old',
    ]);
    expect(cloud.deleted).toEqual([]);
    expect(logs.deleted).toEqual([]);
    expect(await platformState()).toEqual(before);
  });

  it('deletes everything of the eligible account in bounded batches, keeps its financial record, touches no one else', async () => {
    const before = await platformState();
    const run = await runCleanup({ sweep: 'purge_cancelled' }, { batchSize: 2 });
    expect(run.steps).toBeGreaterThan(3); // 2 actions per step
    expect(cloud.deleted.sort()).toEqual(['database:c_old-db1', 'droplet:c_old-node1', 'droplet:c_old-node2', 'droplet:c_old-node3']);
    expect(logs.deleted.sort()).toEqual(['builds/c_old-a.log', 'builds/c_old-b.log', 'builds/c_old-c.log']);
    const after = await platformState();
    const others = (rows: readonly Record<string, unknown>[]) => rows.filter((r) => r.account_id !== 'c_old' && r.id !== 'c_old');
    for (const table of ['services', 'databases', 'clusters', 'usage', 'snapshots'] as const) {
      expect(after[table].filter((r) => r.account_id === 'c_old'), table).toEqual([]);
      expect(others(after[table]), table).toEqual(others(before[table]));
    }
    expect(after.invoices).toEqual(before.invoices);
    expect(after.plans).toEqual(before.plans);
    expect(others(after.accounts)).toEqual(others(before.accounts));
    expect(after.accounts.find((a) => a.id === 'c_old')).toMatchObject({ status: 'cancelled', data_purged_at: NOW });
    expect(run.audit.map((a) => a.action)).toEqual([
      'delete_resource', 'delete_resource', 'delete_resource', 'delete_resource',
      'delete_log_objects', 'delete_log_objects',
      'delete_rows', 'delete_rows', 'delete_rows', 'delete_rows', 'delete_rows',
      'mark_purged',
    ]);

    const again = await runCleanup({ sweep: 'purge_cancelled' });
    expect(again.sweep('purge_cancelled').count).toBe(0);
    expect(cloud.deleted).toHaveLength(4);
  });
});

describe('a scheduled cleanup run', () => {
  it('runs every sweep in order and reports each', async () => {
    const run = await runCleanup({});
    expect(run.result.sweeps.map((s) => s.sweep)).toEqual(['orphaned_resources', 'suspend_unpaid', 'purge_cancelled']);
    expect(run.result.dryRun).toBe(false);
  });
});
