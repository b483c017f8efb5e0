import type Stripe from 'stripe';
import { beforeAll, describe, expect, it } from 'vitest';
import { createStripeClient, StripeBilling } from '../../functions/platform/billing/adapters/stripe-billing.ts';
import { invoiceAccountJob } from '../../functions/platform/billing/invoice-account.ts';
import type { Billing } from '../../functions/platform/billing/ports/billing.ts';
import { enqueue, JobRegistry, runSteps, TERMINAL_STATUSES, type JobStatus } from '../../queue/index.ts';
import type { SandboxHandle } from '../../sandbox/server.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { createTestSandbox } from '../support/sandbox.ts';

/**
 * Crash safety of invoice_account: whatever point a run dies at, after each Stripe call, with
 * the response lost on the wire, or resumed after Stripe forgot the idempotency keys, the
 * sandbox ends with exactly one finalized invoice carrying each line exactly once.
 *
 * Every account here: starter plan (2000 ¢, 500 ¢ credit) and 800 ¢ of bandwidth →
 * lines plan 2000, usage 800, credit −500; total 2300. A clean run makes 5 Stripe calls:
 * create invoice, 3 items, finalize.
 */

const EXPECTED_LINES = [['credit', -500], ['plan', 2000], ['usage:bandwidth_gb', 800]];
const CLEAN_RUN = ['createInvoice', 'createInvoiceItem', 'createInvoiceItem', 'createInvoiceItem', 'finalizeInvoice'] as const;

let db: TestDatabase;
let sandbox: SandboxHandle;
let stripe: Stripe;
let clock = new Date('2026-12-01T01:00:00Z');

beforeAll(async () => {
  db = await createTestDatabase();
  sandbox = await createTestSandbox();
  stripe = createStripeClient({ secretKey: 'sk_test_crash', apiBase: sandbox.url, maxNetworkRetries: 0 });
  await db.sql`insert into platform.plans (id, name, monthly_price_cents, included_credit_cents) values ('starter', 'Starter', 2000, 500)`;
});

/** The Billing port, dying (as a crashed invocation would, the call having landed) right after its n-th call, once. */
function crashingAfter(billing: Billing, n: number): Billing & { calls: string[] } {
  const calls: string[] = [];
  const wrap =
    <A extends unknown[], R>(name: string, f: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      const result = await f(...args);
      calls.push(name);
      if (calls.length === n) throw new Error(`injected crash after call ${n} (${name})`);
      return result;
    };
  return {
    calls,
    createInvoice: wrap('createInvoice', (i) => billing.createInvoice(i)),
    getInvoice: wrap('getInvoice', (id) => billing.getInvoice(id)),
    listInvoiceLineKeys: wrap('listInvoiceLineKeys', (id) => billing.listInvoiceLineKeys(id)),
    createInvoiceItem: wrap('createInvoiceItem', (i) => billing.createInvoiceItem(i)),
    finalizeInvoice: wrap('finalizeInvoice', (id, o) => billing.finalizeInvoice(id, o)),
  };
}

async function newAccount(id: string): Promise<string> {
  const customer = (await stripe.customers.create({ name: id })).id;
  await db.sql`select platform.create_account(${id}, 'starter', ${customer}, '2026-01-01'::timestamptz)`;
  await db.sql`insert into platform.usage_totals (account_id, period, metric, quantity, cents) values (${id}, '2026-11', 'bandwidth_gb', '100', 800)`;
  return customer;
}

/** Tick until the job settles, moving the clock past each retry's backoff. */
async function runToEnd(billing: Billing, jobId: string, between?: () => Promise<void>): Promise<{ status: JobStatus; attempts: number; lastError: string | null }> {
  const runner = { sql: db.sql, registry: new JobRegistry([invoiceAccountJob({ billing })]), workerId: 'crash-test', clock: () => clock };
  for (let tick = 0; tick < 20; tick++) {
    await runSteps(runner);
    const [row] = await db.sql`select status, attempts, last_error from worker.jobs where id = ${jobId}`;
    if (TERMINAL_STATUSES.includes(row!.status as JobStatus)) return { status: row!.status as JobStatus, attempts: row!.attempts as number, lastError: row!.last_error as string | null };
    await between?.();
    clock = new Date(clock.getTime() + 3_600_000);
  }
  throw new Error('the job did not settle in 20 ticks');
}

async function invoicesAtStripe(customer: string) {
  const state = (await (await fetch(`${sandbox.url}/_sandbox/stripe/state`)).json()) as {
    invoices: { id: string; customer: string; status: string; total: number; items: { amount: number; metadata: Record<string, string> }[] }[];
    pendingItems: unknown[];
  };
  expect(state.pendingItems).toEqual([]);
  return state.invoices.filter((i) => i.customer === customer);
}

async function expectExactlyOneInvoice(accountId: string, customer: string) {
  const invoices = await invoicesAtStripe(customer);
  expect(invoices).toHaveLength(1);
  expect(invoices[0]).toMatchObject({ status: 'open', total: 2300 });
  expect(invoices[0]!.items.map((i) => [i.metadata.starbase_line, i.amount]).sort()).toEqual(EXPECTED_LINES);
  const [row] = await db.sql`select status, total_cents, stripe_invoice_id from platform.invoices where account_id = ${accountId} and period = '2026-11'`;
  expect(row).toEqual({ status: 'open', total_cents: '2300', stripe_invoice_id: invoices[0]!.id });
}

describe('invoice_account survives a crash at any point', () => {
  it.each(CLEAN_RUN.map((call, i) => [i + 1, call] as const))('crash after Stripe call %i (%s): exactly one invoice', async (n) => {
    const accountId = `acct_crash_${n}`;
    const customer = await newAccount(accountId);
    const billing = crashingAfter(new StripeBilling(stripe), n);
    const { job } = await enqueue(db.sql, { type: 'invoice_account', payload: { accountId, period: '2026-11' } }, { now: clock });
    const end = await runToEnd(billing, job.id);
    expect(end).toMatchObject({ status: 'done', lastError: expect.stringContaining(`injected crash after call ${n}`) });
    expect(billing.calls.slice(0, n)).toEqual(CLEAN_RUN.slice(0, n));
    await expectExactlyOneInvoice(accountId, customer);
  });

  it.each([
    ['POST', '/v1/invoices'],
    ['POST', '/v1/invoiceitems'],
    ['POST', '/v1/invoices/*'], // finalize
  ])('Stripe acts but the answer to %s %s is lost: exactly one invoice', async (method, path) => {
    const accountId = `acct_lost_${path.replace(/\W+/g, '_')}`;
    const customer = await newAccount(accountId);
    await fetch(`${sandbox.url}/_sandbox/stripe/faults`, { method: 'POST', body: JSON.stringify({ method, path, status: 500, afterEffect: true }) });
    const { job } = await enqueue(db.sql, { type: 'invoice_account', payload: { accountId, period: '2026-11' } }, { now: clock });
    const end = await runToEnd(new StripeBilling(stripe), job.id);
    expect(end.status).toBe('done');
    expect(end.attempts).toBeGreaterThanOrEqual(1);
    await expectExactlyOneInvoice(accountId, customer);
  });

  it('resumes after Stripe forgot the idempotency keys (over 24 h later) without a second invoice or item', async () => {
    const accountId = 'acct_keys_expired';
    const customer = await newAccount(accountId);
    const billing = crashingAfter(new StripeBilling(stripe), 3); // the invoice and two of its three items exist
    const { job } = await enqueue(db.sql, { type: 'invoice_account', payload: { accountId, period: '2026-11' } }, { now: clock });
    const expire = async () => void (await fetch(`${sandbox.url}/_sandbox/stripe/idempotency/expire`, { method: 'POST' }));
    const end = await runToEnd(billing, job.id, expire);
    expect(end.status).toBe('done');
    // The resumed run read the invoice and its items instead of trusting keys Stripe no longer has.
    expect(billing.calls).toEqual([...CLEAN_RUN.slice(0, 3), 'getInvoice', 'listInvoiceLineKeys', 'createInvoiceItem', 'finalizeInvoice']);
    await expectExactlyOneInvoice(accountId, customer);
  });

  it('fails permanently, with Stripe\'s reason, when Stripe refuses the request', async () => {
    const accountId = 'acct_unknown_customer';
    await db.sql`select platform.create_account(${accountId}, 'starter', 'cus_does_not_exist', '2026-01-01'::timestamptz)`;
    const { job } = await enqueue(db.sql, { type: 'invoice_account', payload: { accountId, period: '2026-11' } }, { now: clock });
    const end = await runToEnd(new StripeBilling(stripe), job.id);
    expect(end).toMatchObject({ status: 'failed', attempts: 1 });
    expect(end.lastError).toMatch(/Stripe refused the request \(404 invalid_request_error\/resource_missing\): No such customer: 'cus_does_not_exist'/);
  });

  it('retries a Stripe outage and then bills once', async () => {
    const accountId = 'acct_outage';
    const customer = await newAccount(accountId);
    await fetch(`${sandbox.url}/_sandbox/stripe/faults`, { method: 'POST', body: JSON.stringify({ method: 'POST', path: '/v1/invoiceitems', status: 503, count: 2 }) });
    const { job } = await enqueue(db.sql, { type: 'invoice_account', payload: { accountId, period: '2026-11' } }, { now: clock });
    const end = await runToEnd(new StripeBilling(stripe), job.id);
    expect(end.status).toBe('done');
    await expectExactlyOneInvoice(accountId, customer);
  });
});
