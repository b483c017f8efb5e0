import { z } from 'zod';
import { parseRow, parseRows } from '../rows.ts';
import { DAY_MS, PLATFORM_RESOURCE_OWNERS, PURGED_ACCOUNT_TABLES, type CleanupAction, type CleanupDeps, type SweepContext, type SweepOutcome } from './sweep.ts';

/** What suspend_unpaid selects (dry run) or changed: one row per account and per service. */
const SUSPENDED = 'platform.accounts and platform.services';
const suspensionRow = z.object({ action: z.string(), target: z.string(), account_id: z.string(), payment_failed_at: z.date().nullable().optional() });

export async function sweepSuspendUnpaid(c: SweepContext, deps: CleanupDeps): Promise<SweepOutcome> {
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
    const actions = parseRows(SUSPENDED, suspensionRow, rows).map((r) => ({ action: r.action, target: r.target, detail: { accountId: r.account_id } }));
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
  const actions = parseRows(SUSPENDED, suspensionRow, rows).map((r) => ({
    action: r.action,
    target: r.target,
    detail: { accountId: r.account_id, ...(r.payment_failed_at ? { paymentFailedAt: r.payment_failed_at.toISOString() } : {}) },
  }));
  for (const a of actions) await c.act(a); // already taken by the statement above: record only
  return { actions, more: actions.filter((a) => a.action === 'suspend_account').length >= c.batch };
}

const idRow = z.object({ id: z.string() });
const tagRow = z.object({ tag: z.string() });
const countRow = z.object({ n: z.number().int() });

export async function sweepPurgeCancelled(c: SweepContext, deps: CleanupDeps): Promise<SweepOutcome> {
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
  for (const { id } of parseRows('platform.accounts', idRow, accounts)) {
    const complete = await purgeAccount(c, deps, id, take, () => budget);
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
    for (const { tag } of parseRows(o.table, tagRow, rows)) {
      for (const r of await deps.inventory.listTagged(tag)) {
        if (budget() <= 0) return false;
        await take({ action: 'delete_resource', target: `${r.type}:${r.id}`, detail: { accountId, name: r.name, tag } }, () => deps.inventory.delete(r));
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
    const [counted] = c.dryRun
      ? await sql`select count(*)::int as n from ${sql(table)} where account_id = ${accountId}`
      : await sql`
          with gone as (
            delete from ${sql(table)} where ctid = any(array(select ctid from ${sql(table)} where account_id = ${accountId} limit ${limit}))
            returning 1)
          select count(*)::int as n from gone`;
    const { n } = parseRow(table, countRow, counted);
    if (n > 0) await take({ action: 'delete_rows', target: `account:${accountId}`, detail: { table, rows: n } });
    if (!c.dryRun && n >= limit) return false;
  }

  if (budget() <= 0) return false;
  await take({ action: 'mark_purged', target: `account:${accountId}` }, () => sql`
    update platform.accounts set data_purged_at = ${c.now} where id = ${accountId} and data_purged_at is null`);
  return true;
}
