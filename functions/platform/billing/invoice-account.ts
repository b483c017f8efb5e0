import { z } from 'zod';
import type { Queryable } from '../../../queue/db.ts';
import { PermanentError } from '../../../queue/errors.ts';
import type { Json } from '../../../queue/job.ts';
import { defineJobType, done, type JobType, type StepContext, type StepResult } from '../../../queue/registry.ts';
import {
  computeInvoice,
  isPeriod,
  LINE_KINDS,
  periodBounds,
  planForPeriod,
  type InvoiceComputation,
  type InvoiceLine,
  type Plan,
  type SizeSnapshot,
  type UsageTotal,
} from './billing-calc.ts';
import { parseRow, parseRows, intColumn } from '../rows.ts';
import { billingKeys, BillingRejectedError, type Billing, type ProviderInvoice } from './ports/billing.ts';

/**
 * invoice_account: one account's invoice for one closed period, in one resumable step:
 * compute the lines (billing-calc) and freeze them in platform.invoices (status draft, or
 * no_charge when there is nothing to bill), then create the Stripe invoice, one item per line,
 * finalize, and store the outcome. A retried step finds the frozen row and carries on from it.
 *
 * Never bills twice: the lines are frozen before anything is sent, every create carries a key
 * derived from (account, period, line) (Stripe replays the first answer for 24 h), and the
 * Stripe invoice id is written to the row as soon as Stripe returns it, so a run resumed even
 * after the keys expired reads that invoice and adds only the lines it lacks.
 */

export const INVOICE_ACCOUNT = 'invoice_account';

export const invoiceAccountPayload = z.object({
  accountId: z.string().min(1).max(64),
  period: z.string().refine(isPeriod, 'period must be YYYY-MM'),
});
export type InvoiceAccountPayload = z.infer<typeof invoiceAccountPayload>;

export interface InvoiceAccountDeps {
  billing: Billing;
}

/** The submit key of an account's invoice job: a second month-end run finds the first one's job. */
export function invoiceSubmitKey(accountId: string, period: string): string {
  return `invoice:${accountId}:${period}`;
}

const invoiceLine = z.object({ key: z.string(), kind: z.enum(LINE_KINDS), description: z.string(), amountCents: z.number().int() });

/** A platform.invoices row; its lines are the frozen InvoiceLine[] written below. */
const invoiceRow = z
  .object({
    id: intColumn,
    account_id: z.string(),
    period: z.string(),
    plan: z.string(),
    stripe_customer_id: z.string().nullable(),
    stripe_invoice_id: z.string().nullable(),
    lines: z.array(invoiceLine),
    total_cents: intColumn,
    currency: z.string(),
    status: z.string(),
  })
  .transform((r) => ({
    id: r.id,
    accountId: r.account_id,
    period: r.period,
    plan: r.plan,
    stripeCustomerId: r.stripe_customer_id,
    stripeInvoiceId: r.stripe_invoice_id,
    lines: r.lines satisfies InvoiceLine[],
    totalCents: r.total_cents,
    currency: r.currency,
    status: r.status,
  }));
type InvoiceRow = z.output<typeof invoiceRow>;

async function readInvoice(sql: Queryable, accountId: string, period: string): Promise<InvoiceRow | null> {
  const [row] = await sql`
    select id, account_id, period, plan, stripe_customer_id, stripe_invoice_id, lines, total_cents, currency, status
      from platform.invoices where account_id = ${accountId} and period = ${period}`;
  return row ? parseRow('platform.invoices', invoiceRow, row) : null;
}

const planScheduleRow = z.object({ from_period: z.string(), plan: z.string() });
const planRow = z.object({ id: z.string(), name: z.string(), monthly_price_cents: intColumn, included_credit_cents: intColumn, currency: z.string() });
const snapshotRow = z.object({ database_id: z.string(), cents_per_hour: z.string(), effective_from: z.date() });
const usageRow = z.object({ metric: z.string(), quantity: z.string(), cents: intColumn });

/** Everything billing-calc needs for (account, period), read from the ledger and usage tables. */
export async function loadInvoiceComputation(sql: Queryable, accountId: string, period: string): Promise<InvoiceComputation & { currency: string }> {
  const { start, end } = periodBounds(period);
  const schedule = await sql`select from_period, plan from platform.account_plans where account_id = ${accountId}`;
  const planId = planForPeriod(parseRows('platform.account_plans', planScheduleRow, schedule).map((r) => ({ fromPeriod: r.from_period, planId: r.plan })), period);
  if (!planId) throw new PermanentError(`account ${accountId} has no plan in force for ${period} (platform.account_plans)`);
  const [found] = await sql`select id, name, monthly_price_cents, included_credit_cents, currency from platform.plans where id = ${planId}`;
  const planned = parseRow('platform.plans', planRow, found);
  const plan: Plan = {
    id: planned.id,
    name: planned.name,
    monthlyPriceCents: planned.monthly_price_cents,
    includedCreditCents: planned.included_credit_cents,
  };
  // The snapshots inside the period, plus each database's last one before it (its opening rate).
  const snapshots = await sql`
    select s.database_id, s.cents_per_hour::text as cents_per_hour, s.effective_from
      from platform.database_size_snapshots s
     where s.account_id = ${accountId} and s.effective_from < ${end}
       and s.effective_from >= coalesce((select max(p.effective_from) from platform.database_size_snapshots p
                                          where p.database_id = s.database_id and p.effective_from <= ${start}), '-infinity')`;
  const usage = await sql`
    select metric, quantity::text as quantity, cents from platform.usage_totals where account_id = ${accountId} and period = ${period}`;
  const computation = computeInvoice({
    period,
    plan,
    snapshots: parseRows('platform.database_size_snapshots', snapshotRow, snapshots).map(
      (r): SizeSnapshot => ({ databaseId: r.database_id, centsPerHour: r.cents_per_hour, effectiveFrom: r.effective_from }),
    ),
    usage: parseRows('platform.usage_totals', usageRow, usage).map((r): UsageTotal => ({ metric: r.metric, quantity: r.quantity, cents: r.cents })),
  });
  return { ...computation, currency: planned.currency };
}

function summary(row: InvoiceRow, extra: Record<string, Json> = {}): Json {
  return { invoiceId: row.id, stripeInvoiceId: row.stripeInvoiceId, status: row.status, totalCents: row.totalCents, lines: row.lines.length, ...extra };
}

const accountRow = z.object({ id: z.string(), stripe_customer_id: z.string().nullable() });

/** The account's invoice row for the period: the one already frozen, or computed and frozen now. */
async function frozenInvoice(ctx: StepContext<InvoiceAccountPayload>): Promise<{ row: InvoiceRow; existed: boolean }> {
  const { sql, payload } = ctx;
  const { accountId, period } = payload;
  const existing = await readInvoice(sql, accountId, period);
  if (existing) return { row: existing, existed: true };
  if (ctx.now() < periodBounds(period).end) throw new PermanentError(`period ${period} has not ended yet: its usage is not final`);
  const [found] = await sql`select id, stripe_customer_id from platform.accounts where id = ${accountId}`;
  if (!found) throw new PermanentError(`account ${accountId} does not exist`);
  const customerId = parseRow('platform.accounts', accountRow, found).stripe_customer_id;
  if (!customerId) {
    throw new PermanentError(`account ${accountId} has no Stripe customer (platform.accounts.stripe_customer_id is empty): nothing was sent to Stripe; set the customer id, then retry this job`);
  }
  const computation = await loadInvoiceComputation(sql, accountId, period);
  await sql`
    insert into platform.invoices (account_id, period, plan, stripe_customer_id, lines, total_cents, currency, status, job_id, created_at)
    values (${accountId}, ${period}, ${computation.planId}, ${customerId}, ${sql.json(computation.lines)}, ${computation.totalCents},
            ${computation.currency}, ${computation.lines.length === 0 ? 'no_charge' : 'draft'}, ${ctx.job.id}, ${ctx.now()})
    on conflict (account_id, period) do nothing`;
  // Whichever computation reached the table first is the one billed.
  const frozen = await readInvoice(sql, accountId, period);
  if (!frozen) throw new Error(`platform.invoices has no row for ${accountId} ${period} after inserting it`);
  return { row: frozen, existed: false };
}

/** Create the Stripe invoice (or find the one a previous attempt created), add the lines it lacks, finalize. */
async function submitInvoice(ctx: StepContext<InvoiceAccountPayload>, row: InvoiceRow, billing: Billing): Promise<StepResult> {
  const { sql } = ctx;
  const customerId = row.stripeCustomerId!;
  const keys = billingKeys(row.accountId, row.period);
  const { start, end } = periodBounds(row.period);

  let invoice: ProviderInvoice;
  const resumed = row.stripeInvoiceId !== null;
  if (resumed) {
    invoice = await billing.getInvoice(row.stripeInvoiceId!);
  } else {
    invoice = await billing.createInvoice({
      customerId,
      accountId: row.accountId,
      period: row.period,
      currency: row.currency,
      description: `Starbase ${row.period}`,
      idempotencyKey: keys.invoice,
    });
    // Written at once, outside the step's settle: the invoice exists at Stripe whoever holds the lease.
    await sql`update platform.invoices set stripe_invoice_id = ${invoice.id} where id = ${row.id} and stripe_invoice_id is null`;
    row.stripeInvoiceId = invoice.id;
  }

  if (invoice.status === 'draft') {
    const present = resumed ? await billing.listInvoiceLineKeys(invoice.id) : new Set<string>();
    for (const line of row.lines) {
      if (present.has(line.key)) continue;
      ctx.signal.throwIfAborted();
      await billing.createInvoiceItem({
        customerId,
        invoiceId: invoice.id,
        lineKey: line.key,
        description: line.description,
        amountCents: line.amountCents,
        currency: row.currency,
        periodStart: start,
        periodEnd: end,
        idempotencyKey: keys.item(line.key),
      });
    }
    invoice = await billing.finalizeInvoice(invoice.id, { idempotencyKey: keys.finalize });
  }

  const finishedAt = ctx.now();
  const record = (q: Queryable) => q`
    update platform.invoices
       set status = ${invoice.status}, finalized_at = coalesce(finalized_at, ${finishedAt}),
           paid_at = case when ${invoice.status} = 'paid' then coalesce(paid_at, ${finishedAt}) else paid_at end
     where id = ${row.id}`;
  if (invoice.totalCents !== row.totalCents) {
    // Money is wrong somewhere (items added at Stripe by hand?): record what Stripe has and fail loudly.
    await record(sql);
    throw new PermanentError(`Stripe invoice ${invoice.id} totals ${invoice.totalCents} cents but ${row.totalCents} were computed for ${row.accountId} ${row.period}`);
  }
  return done(summary({ ...row, status: invoice.status }), (tx) => record(tx));
}

export function invoiceAccountJob(deps: InvoiceAccountDeps): JobType<InvoiceAccountPayload> {
  return defineJobType({
    type: INVOICE_ACCOUNT,
    enqueueVia: 'billing_cron (one per billable account)',
    payload: invoiceAccountPayload,
    leaseMs: 120_000,
    maxAttempts: 5,
    retry: { baseMs: 5_000, maxMs: 10 * 60_000 },
    async run(ctx) {
      try {
        const { row, existed } = await frozenInvoice(ctx);
        if (row.status !== 'draft') return done(summary(row, existed ? { alreadyInvoiced: true } : {}));
        return await submitInvoice(ctx, row, deps.billing);
      } catch (error) {
        if (error instanceof BillingRejectedError) throw new PermanentError(error.message);
        throw error;
      }
    },
  });
}
