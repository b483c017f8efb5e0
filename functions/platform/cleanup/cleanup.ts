import { z } from 'zod';
import type { Queryable } from '../../../queue/db.ts';
import { PermanentError } from '../../../queue/errors.ts';
import type { JsonObject } from '../../../queue/job.ts';
import { jobIdsInStatus } from '../../../queue/jobs-query.ts';
import { defineJobType, done, next, type JobType, type StepContext } from '../../../queue/registry.ts';
import type { AccountLogObjects } from './ports/account-log-objects.ts';

/**
 * cleanup: the sweeps the cleanup Cron Trigger runs (every 15 minutes).
 *
 *   orphaned_resources  cloud resources tagged as ours whose tags no live owning row claims
 *                       (a row is not live once destroyed, or once its provisioning job ended
 *                       failed, oom_killed or cancelled), older than a grace period (a provisioning step writes its row right
 *                       after the provider call; the grace covers that window) → deleted
 *   suspend_unpaid      accounts in payment_failed for longer than a grace period → account
 *                       `suspended`, its services' desired state `suspended: true`
 *   purge_cancelled     accounts cancelled more than 30 days ago, whose last month has been
 *                       billed → their databases and clusters (at the provider), log objects
 *                       and rows deleted; the account row, its plans and invoices stay as the
 *                       financial record, marked data_purged_at
 *
 * Each step runs one bounded batch of one sweep and continues with the same sweep while work is
 * left, then the next sweep. Every sweep is idempotent (it selects only what still needs doing;
 * deleting what is gone is not an error), so an overlapping or repeated run is harmless. Every
 * action is written to platform.cleanup_actions (with the job id) as it is taken, and listed in
 * the job's result. A dry run lists the first batch of each sweep and changes nothing.
 */

export const CLEANUP = 'cleanup';
export const SWEEPS = ['orphaned_resources', 'suspend_unpaid', 'purge_cancelled'] as const;
export type Sweep = (typeof SWEEPS)[number];

export const cleanupPayload = z.object({ sweep: z.enum(SWEEPS).optional(), dryRun: z.boolean().optional() });
export type CleanupPayload = z.infer<typeof cleanupPayload>;

/** A resource at the cloud provider (a managed database, a droplet). */
export interface CloudResource {
  type: 'database' | 'droplet' | (string & {});
  id: string;
  name: string;
  tags: string[];
  createdAt: Date;
}

/** The slice of the cloud the sweeps need. */
export interface CloudInventory {
  /** Every resource (of every type) carrying the tag. */
  listTagged(tag: string): Promise<CloudResource[]>;
  /** Delete one resource; one that is already gone is not an error. */
  delete(resource: Pick<CloudResource, 'type' | 'id'>): Promise<void>;
}

export type { AccountLogObjects } from './ports/account-log-objects.ts';

/** A table whose rows own cloud resources: a resource is owned while a live row's tag is on it. */
export interface ResourceOwnerTable {
  table: string;
  tagColumn: string;
  accountColumn: string;
  /** Rows with this status own nothing any more (their resources should be gone). */
  deadStatus?: { column: string; value: string };
  /**
   * The column holding the id of the job that provisions the row. A row whose job ended failed,
   * oom_killed or cancelled owns nothing either: the runner compensates a job it fails or
   * cancels, but one ended by the lease rescue (a crash at the top weight class, or on its final
   * attempt) runs no hook, and its row would otherwise keep its resources forever. Requeueing the
   * job makes the row an owner again.
   */
  ownerJobColumn?: string;
}

/** The tag on every resource provisioning creates (functions/jobs/provisioning/resources.ts). */
export const MANAGED_TAG = 'starbase';

/** platform.databases and platform.clusters keep the tag they put on their resources. */
export const PLATFORM_RESOURCE_OWNERS: ResourceOwnerTable[] = [
  { table: 'platform.databases', tagColumn: 'provider_tag', accountColumn: 'account_id', deadStatus: { column: 'status', value: 'destroyed' }, ownerJobColumn: 'job_id' },
  { table: 'platform.clusters', tagColumn: 'provider_tag', accountColumn: 'account_id', deadStatus: { column: 'status', value: 'destroyed' }, ownerJobColumn: 'id' },
];

/** The rows of a purged account (each table has an account_id column), deleted in this order. */
export const PURGED_ACCOUNT_TABLES = [
  'platform.databases',
  'platform.clusters',
  'platform.services',
  'platform.usage_totals',
  'platform.database_size_snapshots',
];

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

export interface CleanupDeps {
  inventory: CloudInventory;
  logs: AccountLogObjects;
  managedTag?: string;
  ownerTables?: ResourceOwnerTable[];
  accountTables?: string[];
  /** Untagged-by-a-live-row resources younger than this are left alone (default 6 h). */
  orphanGraceMs?: number;
  /** How long an account may stay in payment_failed before its services are suspended (default 7 days). */
  paymentGraceMs?: number;
  /** How long a cancelled account's data is kept (default 30 days). */
  cancelledRetentionMs?: number;
  /** Actions per step (default 100). */
  batchSize?: number;
}

export interface CleanupAction {
  action: string;
  target: string;
  detail?: JsonObject;
}

interface SweepOutcome {
  actions: CleanupAction[];
  /** Work is left for another batch. */
  more: boolean;
}

interface SweepContext {
  sql: Queryable;
  now: Date;
  dryRun: boolean;
  batch: number;
  /** Take the action (unless dry run) and write it to the audit trail. */
  act(action: CleanupAction, perform?: () => Promise<unknown>): Promise<void>;
}

const MAX_LISTED_ACTIONS = 200;

/** A row whose provisioning job ended in one of these owns nothing (see ownerJobColumn). */
const ENDED_UNSUCCESSFULLY = ['failed', 'oom_killed', 'cancelled'] as const;

async function liveOwnerTags(sql: Queryable, owners: ResourceOwnerTable[], tags: string[]): Promise<Set<string>> {
  const owned = new Set<string>();
  if (tags.length === 0) return owned;
  for (const o of owners) {
    const rows = await sql`
      select r.${sql(o.tagColumn)} as tag${o.ownerJobColumn ? sql`, r.${sql(o.ownerJobColumn)}::text as owner_job` : sql``} from ${sql(o.table)} r
       where r.${sql(o.tagColumn)} = any(${tags}::text[])
         ${o.deadStatus ? sql`and r.${sql(o.deadStatus.column)} is distinct from ${o.deadStatus.value}` : sql``}`;
    const ownerJobs = rows.flatMap((r) => (r.owner_job == null ? [] : [String(r.owner_job)]));
    const ended = o.ownerJobColumn ? await jobIdsInStatus(sql, ownerJobs, ENDED_UNSUCCESSFULLY) : new Set<string>();
    for (const r of rows) if (r.owner_job == null || !ended.has(String(r.owner_job))) owned.add(String(r.tag));
  }
  return owned;
}

async function sweepOrphanedResources(c: SweepContext, deps: CleanupDeps): Promise<SweepOutcome> {
  const grace = deps.orphanGraceMs ?? 6 * HOUR_MS;
  const resources = (await deps.inventory.listTagged(deps.managedTag ?? MANAGED_TAG)).filter((r) => r.createdAt.getTime() <= c.now.getTime() - grace);
  const owned = await liveOwnerTags(c.sql, deps.ownerTables ?? PLATFORM_RESOURCE_OWNERS, [...new Set(resources.flatMap((r) => r.tags))]);
  const orphans = resources.filter((r) => !r.tags.some((t) => owned.has(t))).sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime());
  const actions: CleanupAction[] = [];
  for (const r of orphans.slice(0, c.batch)) {
    const action = { action: 'delete_resource', target: `${r.type}:${r.id}`, detail: { name: r.name, tags: r.tags, createdAt: r.createdAt.toISOString() } };
    await c.act(action, () => deps.inventory.delete(r));
    actions.push(action);
  }
  return { actions, more: orphans.length > c.batch };
}

async function sweepSuspendUnpaid(c: SweepContext, deps: CleanupDeps): Promise<SweepOutcome> {
  const cutoff = new Date(c.now.getTime() - (deps.paymentGraceMs ?? 7 * DAY_MS));
  const { sql } = c;
  if (c.dryRun) {
    const rows = await sql`
      with due as (
        select id from platform.accounts where status = 'payment_failed' and payment_failed_at <= ${cutoff}
         order by payment_failed_at, id limit ${c.batch})
      select 'suspend_account' as action, 'account:' || d.id as target, d.id as account_id from due d
      union all
      select 'suspend_service', 'service:' || s.id, s.account_id from platform.services s join due d on d.id = s.account_id
       where not coalesce((s.desired_state->>'suspended')::boolean, false)`;
    const actions = rows.map((r) => ({ action: r.action as string, target: r.target as string, detail: { accountId: r.account_id as string } }));
    for (const a of actions) await c.act(a);
    return { actions, more: false };
  }
  // One statement: the status check and the suspension cannot be split by a payment webhook.
  const rows = await sql`
    with due as (
      select id from platform.accounts where status = 'payment_failed' and payment_failed_at <= ${cutoff}
       order by payment_failed_at, id limit ${c.batch} for update skip locked),
    acct as (
      update platform.accounts a set status = 'suspended', suspended_at = ${c.now}
        from due where a.id = due.id and a.status = 'payment_failed'
      returning a.id, a.payment_failed_at),
    svc as (
      update platform.services s
         set desired_state = s.desired_state || jsonb_build_object('suspended', true, 'suspendedReason', 'payment_failed', 'suspendedAt', ${c.now.toISOString()}::text),
             updated_at = ${c.now}
        from acct where s.account_id = acct.id and not coalesce((s.desired_state->>'suspended')::boolean, false)
      returning s.id, s.account_id)
    select 'suspend_account' as action, 'account:' || id as target, id as account_id, payment_failed_at from acct
    union all
    select 'suspend_service', 'service:' || id, account_id, null from svc`;
  const actions = rows.map((r) => ({
    action: r.action as string,
    target: r.target as string,
    detail: { accountId: r.account_id as string, ...(r.payment_failed_at ? { paymentFailedAt: (r.payment_failed_at as Date).toISOString() } : {}) },
  }));
  for (const a of actions) await c.act(a); // already taken by the statement above: record only
  return { actions, more: actions.filter((a) => a.action === 'suspend_account').length >= c.batch };
}

async function sweepPurgeCancelled(c: SweepContext, deps: CleanupDeps): Promise<SweepOutcome> {
  const cutoff = new Date(c.now.getTime() - (deps.cancelledRetentionMs ?? 30 * DAY_MS));
  const { sql } = c;
  // The cancellation month must have been billed first: its usage rows are what it is billed from.
  const accounts = await sql`
    select a.id from platform.accounts a
     where a.status = 'cancelled' and a.cancelled_at <= ${cutoff} and a.data_purged_at is null
       and exists (select 1 from platform.billing_runs r where r.period = platform.period_of(a.cancelled_at))
       and not exists (select 1 from platform.invoices i where i.account_id = a.id and i.status = 'draft')
     order by a.cancelled_at, a.id limit ${c.batch}`;
  const actions: CleanupAction[] = [];
  let budget = c.batch;
  const take = async (action: CleanupAction, perform?: () => Promise<unknown>) => {
    await c.act(action, perform);
    actions.push(action);
    budget--;
  };
  for (const { id } of accounts) {
    const complete = await purgeAccount(c, deps, id as string, take, () => budget);
    if (!complete || budget <= 0) return { actions, more: true };
  }
  return { actions, more: accounts.length >= c.batch };
}

/**
 * One account's data, in dependency order: provider resources (found by the tags its owner rows
 * recorded), log objects, rows. True when nothing is left and the account was marked purged.
 */
async function purgeAccount(
  c: SweepContext,
  deps: CleanupDeps,
  accountId: string,
  take: (action: CleanupAction, perform?: () => Promise<unknown>) => Promise<void>,
  budget: () => number,
): Promise<boolean> {
  const { sql } = c;
  for (const o of deps.ownerTables ?? PLATFORM_RESOURCE_OWNERS) {
    const rows = await sql`select distinct ${sql(o.tagColumn)} as tag from ${sql(o.table)} where ${sql(o.accountColumn)} = ${accountId}`;
    for (const { tag } of rows) {
      for (const r of await deps.inventory.listTagged(tag as string)) {
        if (budget() <= 0) return false;
        await take({ action: 'delete_resource', target: `${r.type}:${r.id}`, detail: { accountId, name: r.name, tag: tag as string } }, () => deps.inventory.delete(r));
      }
    }
  }

  if (budget() <= 0) return false;
  const keys = await deps.logs.list(accountId, c.batch);
  if (keys.length > 0) await take({ action: 'delete_log_objects', target: `account:${accountId}`, detail: { keys } }, () => deps.logs.delete(keys));
  if (keys.length >= c.batch) return false; // a full page: there may be more

  // Rows are cheap to delete: one action stands for a batch of up to 10 × batchSize of them.
  const limit = 10 * c.batch;
  for (const table of deps.accountTables ?? PURGED_ACCOUNT_TABLES) {
    if (budget() <= 0) return false;
    const [row] = c.dryRun
      ? await sql`select count(*)::int as n from ${sql(table)} where account_id = ${accountId}`
      : await sql`
          with gone as (
            delete from ${sql(table)} where ctid = any(array(select ctid from ${sql(table)} where account_id = ${accountId} limit ${limit}))
            returning 1)
          select count(*)::int as n from gone`;
    const n = row!.n as number;
    if (n > 0) await take({ action: 'delete_rows', target: `account:${accountId}`, detail: { table, rows: n } });
    if (!c.dryRun && n >= limit) return false;
  }

  if (budget() <= 0) return false;
  await take({ action: 'mark_purged', target: `account:${accountId}` }, () => sql`
    update platform.accounts set data_purged_at = ${c.now} where id = ${accountId} and data_purged_at is null`);
  return true;
}

const SWEEP_FUNCTIONS: Record<Sweep, (c: SweepContext, deps: CleanupDeps) => Promise<SweepOutcome>> = {
  orphaned_resources: sweepOrphanedResources,
  suspend_unpaid: sweepSuspendUnpaid,
  purge_cancelled: sweepPurgeCancelled,
};

interface SweepTally {
  count: number;
  actions: CleanupAction[];
  omitted: number;
}

export function cleanupJob(deps: CleanupDeps): JobType<CleanupPayload> {
  const batch = Math.max(1, deps.batchSize ?? 100);
  return defineJobType({
    type: CLEANUP,
    enqueueVia: 'its schedule (every 15 minutes)',
    payload: cleanupPayload,
    leaseMs: 300_000,
    maxAttempts: 3,
    async run(ctx: StepContext<CleanupPayload>) {
      const { sql, payload, job } = ctx;
      const dryRun = payload.dryRun === true;
      const plan: readonly Sweep[] = payload.sweep ? [payload.sweep] : SWEEPS;
      const sweep = (ctx.step === 'start' ? plan[0] : ctx.step) as Sweep;
      if (!plan.includes(sweep)) throw new PermanentError(`cleanup has no sweep "${ctx.step}"`);
      const now = ctx.now();
      const c: SweepContext = {
        sql,
        now,
        dryRun,
        batch,
        async act(action, perform) {
          if (dryRun) return;
          await perform?.();
          await sql`
            insert into platform.cleanup_actions (job_id, sweep, action, target, detail, at)
            values (${job.id}, ${sweep}, ${action.action}, ${action.target}, ${sql.json(action.detail ?? {})}, ${now})`;
        },
      };
      const outcome = await SWEEP_FUNCTIONS[sweep](c, deps);

      const tallies = { ...((ctx.checkpoint.sweeps as unknown as Record<string, SweepTally>) ?? {}) };
      const tally = tallies[sweep] ?? { count: 0, actions: [], omitted: 0 };
      const room = Math.max(0, MAX_LISTED_ACTIONS - tally.actions.length);
      tallies[sweep] = {
        count: tally.count + outcome.actions.length,
        actions: [...tally.actions, ...outcome.actions.slice(0, room)],
        omitted: tally.omitted + Math.max(0, outcome.actions.length - room),
      };
      const checkpoint = { sweeps: tallies } as unknown as JsonObject;
      // A dry run changes nothing, so another batch would list the same things again.
      if (outcome.more && !dryRun) return next(sweep, { checkpoint, delayMs: 0 });
      const following = plan[plan.indexOf(sweep) + 1];
      if (following) return next(following, { checkpoint, delayMs: 0 });
      // An array: jsonb does not keep an object's key order, and the order sweeps ran in matters.
      return done({ dryRun, sweeps: plan.map((name) => ({ sweep: name, ...tallies[name]! })) } as unknown as JsonObject);
    },
  });
}
