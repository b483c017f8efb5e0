import { z } from 'zod';
import type { Queryable } from '../../../queue/db.ts';
import { childJoin, spawn } from '../../../queue/children.ts';
import { PermanentError } from '../../../queue/errors.ts';
import { parseCheckpoint } from '../checkpoint.ts';
import { intColumn, parseRow, parseRows } from '../rows.ts';
import type { JobStatus } from '../../../queue/job.ts';
import { jobsBySubmitKeys, jobStatusCountsBySubmitKeys } from '../../../queue/jobs-query.ts';
import { defineJobType, done, next, type JobType } from '../../../queue/registry.ts';
import { isPeriod, periodBounds } from './billing-calc.ts';
import { INVOICE_ACCOUNT, invoiceSubmitKey } from './invoice-account.ts';

/**
 * billing_cron: the month-end run for one closed period.
 *
 *   start  spawns one invoice_account child per billable account, in ONE batch insert with the
 *          step's settle, and waits for all of them (queue/children.ts): parked, no claims, until
 *          the last invoice job ends and makes this one due. Each child has the submit key
 *          invoice:<account>:<period>, so a second run (a duplicate trigger, a retry after a
 *          crash, an operator's re-run) creates nothing new: an invoice job that already exists,
 *          whichever run created it, is adopted (joined like the others, and counted at once if
 *          it has ended). One bad account never blocks the others: a failed child is an outcome.
 *   wait   write the run summary (platform.billing_runs) in the same transaction as completing.
 *          A run that reached `wait` before children existed (started by an earlier release)
 *          polls as it did until every invoice job has settled.
 *
 * Billable for period P: accounts created before P ended and not cancelled before P began, in
 * any status (payment_failed and suspended accounts still owe what they used; an account
 * cancelled during P gets its final invoice).
 */

export const BILLING_CRON = 'billing_cron';

export const billingCronPayload = z.object({ period: z.string().refine(isPeriod, 'period must be YYYY-MM') });
export type BillingCronPayload = z.infer<typeof billingCronPayload>;

export interface BillingCronDeps {
  /** Between polls of the invoice jobs of a run started before children existed (default 30 s). */
  pollDelayMs?: number;
  /** Priority of the invoice jobs (default 50). */
  invoicePriority?: number;
}

const billableRow = z.object({ id: z.string(), submit_key: z.string() });

/** The accounts billed for the period, with their invoice jobs' submit keys (a fragment: runSummary nests it). */
function billableAccounts(sql: Queryable, period: string) {
  const { start, end } = periodBounds(period);
  return sql`
    select a.id, 'invoice:' || a.id || ':' || ${period}::text as submit_key
      from platform.accounts a
     where a.created_at < ${end} and (a.cancelled_at is null or a.cancelled_at >= ${start})`;
}

const MAX_LISTED_FAILURES = 100;

/** A type, not an interface: JSON-compatible as it is (the job's result, and billing_runs.failures). */
export type BillingRunSummary = {
  period: string;
  accounts: number;
  invoiced: number;
  noCharge: number;
  failed: number;
  totalCents: number;
  failures: { accountId: string; jobId: string; error: string | null }[];
};

/** The statuses an invoice job that did not invoice ends in. */
const FAILED_STATUSES: readonly JobStatus[] = ['failed', 'cancelled', 'oom_killed'];

/** The submit keys of the period's invoice jobs, in account id order. */
async function invoiceSubmitKeys(sql: Queryable, period: string): Promise<{ accountId: string; submitKey: string }[]> {
  const rows = await sql`select b.id, b.submit_key from (${billableAccounts(sql, period)}) b order by b.id`;
  return parseRows('platform.accounts', billableRow, rows).map((r) => ({ accountId: r.id, submitKey: r.submit_key }));
}

async function settledCounts(sql: Queryable, period: string): Promise<{ pending: number; settled: number }> {
  const keys = await invoiceSubmitKeys(sql, period);
  const counts = await jobStatusCountsBySubmitKeys(sql, keys.map((k) => k.submitKey));
  const pending = counts.queued + counts.running;
  const settled = Object.values(counts).reduce((a, b) => a + b, 0) - pending;
  return { pending, settled };
}

const invoiceCountsRow = z.object({ accounts: intColumn, invoiced: intColumn, no_charge: intColumn, total_cents: intColumn });

async function runSummary(sql: Queryable, period: string): Promise<BillingRunSummary> {
  const [found] = await sql`
    with billable as (${billableAccounts(sql, period)})
    select count(*)::int as accounts,
           count(*) filter (where i.status in ('open', 'paid', 'uncollectible', 'void'))::int as invoiced,
           count(*) filter (where i.status = 'no_charge')::int as no_charge,
           coalesce(sum(i.total_cents) filter (where i.status in ('open', 'paid', 'uncollectible')), 0)::bigint as total_cents
      from billable b
      left join platform.invoices i on i.account_id = b.id and i.period = ${period}`;
  const invoices = parseRow('platform.invoices', invoiceCountsRow, found);
  const keys = await invoiceSubmitKeys(sql, period);
  const submitKeys = keys.map((k) => k.submitKey);
  const counts = await jobStatusCountsBySubmitKeys(sql, submitKeys);
  const failed = new Map((await jobsBySubmitKeys(sql, submitKeys, { statuses: FAILED_STATUSES, limit: MAX_LISTED_FAILURES })).map((j) => [j.submitKey, j]));
  // In account id order: the keys' order, which the jobs query keeps.
  const failures = keys.flatMap(({ accountId, submitKey }) => {
    const job = failed.get(submitKey);
    return job ? [{ accountId, jobId: job.id, error: job.lastError }] : [];
  });
  return {
    period,
    accounts: invoices.accounts,
    invoiced: invoices.invoiced,
    noCharge: invoices.no_charge,
    failed: FAILED_STATUSES.reduce((n, s) => n + counts[s], 0),
    totalCents: invoices.total_cents,
    failures,
  };
}

/** From the fan-out on: when it started (and, for a run started before children, how many invoice jobs it created). */
const waitCheckpoint = z.looseObject({ created: z.number().int().min(0).optional(), startedAt: z.string().optional() });

export function billingCronJob(deps: BillingCronDeps = {}): JobType<BillingCronPayload> {
  const pollDelayMs = deps.pollDelayMs ?? 30_000;
  return defineJobType({
    type: BILLING_CRON,
    enqueueVia: 'its monthly schedule (0 0 1 * *)',
    payload: billingCronPayload,
    // The fan-out inserts one job per account in one statement.
    leaseMs: 600_000,
    maxAttempts: 5,
    async run(ctx) {
      const { sql, payload } = ctx;
      const { period } = payload;
      if (ctx.step === 'start') {
        if (ctx.now() < periodBounds(period).end) throw new PermanentError(`period ${period} has not ended yet`);
        const accounts = parseRows('platform.accounts', billableRow, await billableAccounts(sql, period));
        const invoices = accounts.map((a) => ({
          type: INVOICE_ACCOUNT,
          payload: { accountId: a.id, period },
          submitKey: invoiceSubmitKey(a.id, period),
          priority: deps.invoicePriority ?? 50,
        }));
        return spawn(invoices, { next: 'wait', join: 'all', checkpoint: { accounts: accounts.length, startedAt: ctx.now().toISOString() } });
      }
      if (ctx.step === 'wait') {
        const wait = await childJoin(sql, ctx.job.id);
        if (!wait) {
          const { pending, settled } = await settledCounts(sql, period);
          if (pending > 0) return next('wait', { checkpoint: { pending, settled }, delayMs: pollDelayMs });
        }
        const cp = parseCheckpoint(BILLING_CRON, waitCheckpoint, ctx.checkpoint);
        const created = wait ? wait.created : (cp.created ?? 0);
        const summary = await runSummary(sql, period);
        const startedAt = cp.startedAt !== undefined ? new Date(cp.startedAt) : ctx.now();
        const finishedAt = ctx.now();
        return done({ ...summary, created }, (tx) => tx`
          insert into platform.billing_runs (period, job_id, accounts, invoiced, no_charge, failed, total_cents, failures, started_at, finished_at)
          values (${period}, ${ctx.job.id}, ${summary.accounts}, ${summary.invoiced}, ${summary.noCharge}, ${summary.failed}, ${summary.totalCents},
                  ${tx.json(summary.failures)}, ${startedAt}, ${finishedAt})
          on conflict (period) do update set
            job_id = excluded.job_id, accounts = excluded.accounts, invoiced = excluded.invoiced, no_charge = excluded.no_charge,
            failed = excluded.failed, total_cents = excluded.total_cents, failures = excluded.failures,
            started_at = excluded.started_at, finished_at = excluded.finished_at`);
      }
      throw new PermanentError(`billing_cron has no step "${ctx.step}"`);
    },
  });
}
