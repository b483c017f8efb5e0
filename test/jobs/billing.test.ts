import type Stripe from 'stripe';
import { beforeAll, describe, expect, it } from 'vitest';
import { createStripeClient, StripeBilling } from '../../functions/platform/billing/adapters/stripe-billing.ts';
import { billingCronJob } from '../../functions/platform/billing/billing-cron.ts';
import { previousPeriod } from '../../functions/platform/billing/billing-calc.ts';
import { invoiceAccountJob } from '../../functions/platform/billing/invoice-account.ts';
import { enqueue, JobRegistry, requeueJob, runSteps, type Runner } from '../../queue/index.ts';
import type { SandboxHandle } from '../../sandbox/server.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { createTestSandbox } from '../support/sandbox.ts';

/**
 * Golden billing cases: each account below is a fixture whose expected lines were worked out by
 * hand (the arithmetic is in the comments). Two month-end runs bill them through the real
 * `stripe` SDK against the sandbox Stripe, and both the invoice rows and what the sandbox holds
 * must match exactly.
 *
 * Plans: starter 2000 ¢ with 500 ¢ included credit; pro 9900 ¢ with 5000 ¢; hobby free.
 * November 2026 has 720 hours, December 744.
 */

type Line = [key: string, cents: number];
type Expected = { lines: Line[]; total: number } | { noCharge: true } | { failed: RegExp } | { notBilled: true };

interface Golden {
  account: string;
  why: string;
  plan: string;
  signup: string;
  customer?: false;
  cancelledAt?: string;
  planChanges?: [plan: string, at: string][];
  snapshots?: [database: string, centsPerHour: string, effectiveFrom: string][];
  usage?: [period: string, metric: string, quantity: string, cents: number][];
  expected: Record<'2026-11' | '2026-12', Expected>;
}

const GOLDEN: Golden[] = [
  {
    account: 'acct_resize',
    why: 'a database resized mid-month, and one that existed twice for 15 minutes',
    plan: 'starter',
    signup: '2026-02-01T00:00:00Z',
    snapshots: [
      ['db_main', '2.083333', '2026-10-20T00:00:00Z'], // the rate in force when November opens
      ['db_main', '4.166667', '2026-11-16T12:00:00Z'], // resized after 372 h
      ['db_main', '6.25', '2026-12-01T00:00:00Z'], // December's (must not touch November)
      ['db_blip', '1.2', '2026-11-03T10:00:00Z'],
      ['db_blip', '0', '2026-11-03T10:15:00Z'],
      ['db_blip', '1.2', '2026-11-20T08:00:00Z'],
      ['db_blip', '0', '2026-11-20T08:15:00Z'],
    ],
    usage: [
      ['2026-11', 'bandwidth_gb', '120', 960],
      ['2026-11', 'build_minutes', '300', 150],
    ],
    expected: {
      // db_main: 2.083333 × 372 + 4.166667 × 348 = 774.999876 + 1450.000116 = 2224.999992 → 2225
      // db_blip: 1.2 × 0.25 + 1.2 × 0.25 = 0.6 → 1 (one rounding per line)
      // usage 2225 + 1 + 960 + 150 = 3336 > credit 500 → 2000 + 3336 − 500 = 4836
      '2026-11': {
        lines: [['plan', 2000], ['database:db_blip', 1], ['database:db_main', 2225], ['usage:bandwidth_gb', 960], ['usage:build_minutes', 150], ['credit', -500]],
        total: 4836,
      },
      // db_main: 6.25 × 744 = 4650; db_blip at rate 0 all month → no line; 2000 + 4650 − 500 = 6150
      '2026-12': { lines: [['plan', 2000], ['database:db_main', 4650], ['credit', -500]], total: 6150 },
    },
  },
  {
    account: 'acct_upgrade',
    why: 'a plan change takes effect the next cycle, even when another change lands before the month is billed',
    plan: 'starter',
    signup: '2026-03-02T09:00:00Z',
    planChanges: [
      ['pro', '2026-11-10T09:00:00Z'], // from December
      ['hobby', '2026-12-01T00:01:00Z'], // made before November's run (00:05): from January
    ],
    usage: [
      ['2026-11', 'bandwidth_gb', '87.5', 700],
      ['2026-12', 'bandwidth_gb', '775', 6200],
    ],
    expected: {
      '2026-11': { lines: [['plan', 2000], ['usage:bandwidth_gb', 700], ['credit', -500]], total: 2200 }, // still starter
      '2026-12': { lines: [['plan', 9900], ['usage:bandwidth_gb', 6200], ['credit', -5000]], total: 11100 }, // pro, full price
    },
  },
  {
    account: 'acct_credit',
    why: 'credit larger than usage brings usage to zero, never below, and never discounts the plan',
    plan: 'pro',
    signup: '2026-01-15T00:00:00Z',
    usage: [['2026-11', 'build_minutes', '2468', 1234]],
    expected: {
      '2026-11': { lines: [['plan', 9900], ['usage:build_minutes', 1234], ['credit', -1234]], total: 9900 },
      '2026-12': { lines: [['plan', 9900]], total: 9900 },
    },
  },
  {
    account: 'acct_idle',
    why: 'no usage: the plan alone, no credit line',
    plan: 'starter',
    signup: '2026-06-01T00:00:00Z',
    expected: { '2026-11': { lines: [['plan', 2000]], total: 2000 }, '2026-12': { lines: [['plan', 2000]], total: 2000 } },
  },
  {
    account: 'acct_nocustomer',
    why: 'no Stripe customer: a clear permanent failure that blocks nobody',
    plan: 'starter',
    signup: '2026-04-01T00:00:00Z',
    customer: false,
    usage: [['2026-11', 'bandwidth_gb', '10', 999]],
    expected: { '2026-11': { failed: /has no Stripe customer/ }, '2026-12': { failed: /has no Stripe customer/ } },
  },
  {
    account: 'acct_free',
    why: 'a free plan without usage: nothing to bill, nothing sent to Stripe',
    plan: 'hobby',
    signup: '2026-05-05T00:00:00Z',
    expected: { '2026-11': { noCharge: true }, '2026-12': { noCharge: true } },
  },
  {
    account: 'acct_leaving',
    why: 'cancelled during November: a final invoice for November, nothing after',
    plan: 'starter',
    signup: '2026-05-01T00:00:00Z',
    cancelledAt: '2026-11-20T10:00:00Z',
    usage: [['2026-11', 'egress_gb', '30', 300]],
    expected: { '2026-11': { lines: [['plan', 2000], ['usage:egress_gb', 300], ['credit', -300]], total: 2000 }, '2026-12': { notBilled: true } },
  },
  {
    account: 'acct_gone',
    why: 'cancelled before November: never billed again',
    plan: 'starter',
    signup: '2026-01-01T00:00:00Z',
    cancelledAt: '2026-10-15T00:00:00Z',
    expected: { '2026-11': { notBilled: true }, '2026-12': { notBilled: true } },
  },
  {
    account: 'acct_newcomer',
    why: 'signed up in December: not in November, the full plan price in December',
    plan: 'starter',
    signup: '2026-12-02T08:00:00Z',
    expected: { '2026-11': { notBilled: true }, '2026-12': { lines: [['plan', 2000]], total: 2000 } },
  },
];

let db: TestDatabase;
let sandbox: SandboxHandle;
let stripe: Stripe;
let clock = new Date('2026-12-01T00:05:00Z');

/** What the month-end Cron Trigger enqueues (functions/schedules.ts): the month before the slot, once. */
function monthEndSlot(at: Date) {
  const period = previousPeriod(at);
  return { type: 'billing_cron', payload: { period }, submitKey: `billing_cron:${period}`, priority: 10 };
}
const customers = new Map<string, string>();

function billingRunner(): Runner {
  const registry = new JobRegistry([billingCronJob({ pollDelayMs: 0 }), invoiceAccountJob({ billing: new StripeBilling(stripe) })]);
  return { sql: db.sql, registry, workerId: 'billing-test', concurrency: 8, clock: () => clock };
}

async function sandboxState(): Promise<{ invoices: { id: string; customer: string; status: string; total: number; metadata: Record<string, string>; items: { amount: number; metadata: Record<string, string> }[] }[] }> {
  return (await fetch(`${sandbox.url}/_sandbox/stripe/state`)).json() as never;
}

beforeAll(async () => {
  db = await createTestDatabase();
  sandbox = await createTestSandbox();
  stripe = createStripeClient({ secretKey: 'sk_test_golden', apiBase: sandbox.url, maxNetworkRetries: 0 });
  const { sql } = db;
  await sql`insert into platform.plans (id, name, monthly_price_cents, included_credit_cents) values
              ('starter', 'Starter', 2000, 500), ('pro', 'Pro', 9900, 5000), ('hobby', 'Hobby', 0, 0)`;
  for (const g of GOLDEN) {
    const customer = g.customer === false ? null : (await stripe.customers.create({ name: g.account })).id;
    if (customer) customers.set(g.account, customer);
    await sql`select platform.create_account(${g.account}, ${g.plan}, ${customer}, ${g.signup}::timestamptz)`;
    if (g.cancelledAt) await sql`update platform.accounts set status = 'cancelled', cancelled_at = ${g.cancelledAt} where id = ${g.account}`;
    for (const [plan, at] of g.planChanges ?? []) await sql`select platform.change_plan(${g.account}, ${plan}, ${at}::timestamptz)`;
    for (const [database, rate, from] of g.snapshots ?? []) {
      await sql`insert into platform.database_size_snapshots (database_id, account_id, cents_per_hour, effective_from) values (${database}, ${g.account}, ${rate}, ${from})`;
    }
    for (const [period, metric, quantity, cents] of g.usage ?? []) {
      await sql`insert into platform.usage_totals (account_id, period, metric, quantity, cents) values (${g.account}, ${period}, ${metric}, ${quantity}, ${cents})`;
    }
  }
});

async function runMonthEnd(period: '2026-11' | '2026-12') {
  const { job } = await enqueue(db.sql, monthEndSlot(clock), { now: clock });
  expect(job.payload).toEqual({ period });
  await runSteps(billingRunner());
  const [cron] = await db.sql`select status, result from worker.jobs where id = ${job.id}`;
  expect(cron!.status).toBe('done');
  // Two claims, the fan-out's and the summary's: parked while its invoice jobs ran, it was woken
  // by the last one's settle, never polled.
  const claims = await db.sql`select 1 from worker.job_history where job_id = ${job.id} and kind = 'claimed'`;
  expect(claims).toHaveLength(2);
  return cron!.result as Record<string, unknown>;
}

async function expectGolden(period: '2026-11' | '2026-12') {
  const state = await sandboxState();
  for (const g of GOLDEN) {
    const expected = g.expected[period];
    const [job] = await db.sql`select status, last_error from worker.jobs where submit_key = ${`invoice:${g.account}:${period}`}`;
    const [row] = await db.sql`select lines, total_cents, status, stripe_invoice_id from platform.invoices where account_id = ${g.account} and period = ${period}`;
    const atStripe = state.invoices.filter((i) => i.metadata.starbase_account === g.account && i.metadata.starbase_period === period);
    const label = `${g.account} ${period} (${g.why})`;
    if ('notBilled' in expected) {
      expect(job, label).toBeUndefined();
      expect(row, label).toBeUndefined();
    } else if ('failed' in expected) {
      expect(job, label).toMatchObject({ status: 'failed' });
      expect(job!.last_error, label).toMatch(expected.failed);
      expect(row, label).toBeUndefined();
    } else if ('noCharge' in expected) {
      expect(job!.status, label).toBe('done');
      expect(row, label).toMatchObject({ status: 'no_charge', total_cents: '0', stripe_invoice_id: null });
      expect(atStripe, label).toHaveLength(0);
    } else {
      expect(job!.status, label).toBe('done');
      const lines = (row!.lines as { key: string; amountCents: number }[]).map((l): Line => [l.key, l.amountCents]);
      expect(lines, label).toEqual(expected.lines);
      expect(Number(row!.total_cents), label).toBe(expected.total);
      expect(row!.status, label).toBe('open');
      // Exactly one invoice at Stripe, for the right customer, with exactly these items.
      expect(atStripe, label).toHaveLength(1);
      const [invoice] = atStripe;
      expect(invoice!.id).toBe(row!.stripe_invoice_id);
      expect(invoice!.customer).toBe(customers.get(g.account));
      expect(invoice!.status).toBe('open');
      expect(invoice!.total).toBe(expected.total);
      expect(invoice!.items.map((i): Line => [i.metadata.starbase_line!, i.amount]).sort()).toEqual([...expected.lines].sort());
    }
  }
}

describe('month-end billing (golden cases, real SDK against the sandbox Stripe)', () => {
  it('bills November exactly as hand-checked and records the run summary', async () => {
    const summary = await runMonthEnd('2026-11');
    await expectGolden('2026-11');
    // resize, upgrade, credit, idle, nocustomer, free, leaving
    expect(summary).toMatchObject({ period: '2026-11', accounts: 7, created: 7, invoiced: 5, noCharge: 1, failed: 1, totalCents: 4836 + 2200 + 9900 + 2000 + 2000 });
    expect(summary.failures).toEqual([{ accountId: 'acct_nocustomer', jobId: expect.any(String), error: expect.stringMatching(/has no Stripe customer/) }]);
    const [run] = await db.sql`select accounts, invoiced, no_charge, failed, total_cents from platform.billing_runs where period = '2026-11'`;
    expect(run).toEqual({ accounts: 7, invoiced: 5, no_charge: 1, failed: 1, total_cents: '20936' });
    // Nothing for the account without a customer, or the free one, ever reached Stripe.
    const sent = JSON.stringify(sandbox.calls('stripe').filter((c) => c.path !== '/v1/customers').map((c) => c.body));
    expect(sent).not.toContain('acct_nocustomer');
    expect(sent).not.toContain('acct_free');
  });

  it('bills nothing twice when the month-end run is triggered again', async () => {
    const postsBefore = sandbox.calls('stripe').filter((c) => c.method === 'POST').length;
    const invoicesBefore = (await sandboxState()).invoices.length;
    // The same cron slot again (a duplicate Cron Trigger): the same job, nothing new.
    const again = await enqueue(db.sql, monthEndSlot(clock), { now: clock });
    expect(again.duplicate).toBe(true);
    // An operator's deliberate re-run of the period: it finds every invoice job already there.
    const rerun = await enqueue(db.sql, { type: 'billing_cron', payload: { period: '2026-11' }, submitKey: 'billing_cron:2026-11:rerun' }, { now: clock });
    await runSteps(billingRunner());
    const [job] = await db.sql`select status, result from worker.jobs where id = ${rerun.job.id}`;
    expect(job).toMatchObject({ status: 'done', result: { accounts: 7, created: 0, invoiced: 5 } });
    // And an invoice job enqueued by hand for an account already invoiced does nothing at Stripe.
    await enqueue(db.sql, { type: 'invoice_account', payload: { accountId: 'acct_idle', period: '2026-11' } }, { now: clock });
    await runSteps(billingRunner());
    expect(sandbox.calls('stripe').filter((c) => c.method === 'POST').length).toBe(postsBefore);
    expect((await sandboxState()).invoices.length).toBe(invoicesBefore);
    await expectGolden('2026-11');
  });

  it('a run that reached wait before children existed (an earlier release) polls until its invoice jobs settle', async () => {
    const { job } = await enqueue(db.sql, { type: 'billing_cron', payload: { period: '2026-11' }, submitKey: 'billing_cron:2026-11:legacy' }, { now: clock });
    await db.sql`update worker.jobs set step = 'wait', checkpoint = '{"created": 0}' where id = ${job.id}`;
    // one of the period's invoice jobs is pending again (an operator's requeue)
    const [invoice] = await db.sql`select id from worker.jobs where submit_key = 'invoice:acct_nocustomer:2026-11'`;
    await requeueJob(db.sql, invoice!.id, { now: clock });
    await runSteps({ ...billingRunner(), registry: new JobRegistry([billingCronJob({ pollDelayMs: 0 })]) }, { maxJobs: 1 });
    expect(await db.sql`select step, status from worker.jobs where id = ${job.id}`).toEqual([{ step: 'wait', status: 'queued' }]);
    await runSteps(billingRunner());
    expect(await db.sql`select status from worker.jobs where id = ${invoice!.id}`).toEqual([{ status: 'failed' }]);
    const [cron] = await db.sql`select status, result from worker.jobs where id = ${job.id}`;
    expect(cron).toMatchObject({ status: 'done', result: { accounts: 7, created: 0 } });
  });

  it('bills December with the plan changed in November, and the newcomer', async () => {
    clock = new Date('2027-01-01T00:05:00Z');
    const summary = await runMonthEnd('2026-12');
    await expectGolden('2026-12');
    // resize, upgrade, credit, idle, nocustomer, free, newcomer
    expect(summary).toMatchObject({ period: '2026-12', accounts: 7, invoiced: 5, noCharge: 1, failed: 1, totalCents: 6150 + 11100 + 9900 + 2000 + 2000 });
    await expectGolden('2026-11'); // November untouched
  });

  it('refuses to bill a period that has not ended', async () => {
    const { job } = await enqueue(db.sql, { type: 'billing_cron', payload: { period: '2027-01' } }, { now: clock });
    await runSteps(billingRunner());
    const [row] = await db.sql`select status, last_error from worker.jobs where id = ${job.id}`;
    expect(row).toMatchObject({ status: 'failed', last_error: 'period 2027-01 has not ended yet' });
  });
});

describe('plan changes (platform.change_plan)', () => {
  it('schedule the next cycle, and choosing the plan in force again cancels the pending change', async () => {
    await db.sql`select platform.create_account('acct_planner', 'starter', null, '2026-02-10T00:00:00Z'::timestamptz)`;
    await db.sql`select platform.change_plan('acct_planner', 'pro', '2026-11-10T00:00:00Z'::timestamptz)`;
    await db.sql`select platform.change_plan('acct_planner', 'hobby', '2026-11-11T00:00:00Z'::timestamptz)`; // replaces the pending change
    const schedule = () => db.sql`select from_period, plan from platform.account_plans where account_id = 'acct_planner' order by from_period`;
    expect(await schedule()).toEqual([
      { from_period: '2026-02', plan: 'starter' },
      { from_period: '2026-12', plan: 'hobby' },
    ]);
    await db.sql`select platform.change_plan('acct_planner', 'starter', '2026-11-12T00:00:00Z'::timestamptz)`;
    expect(await schedule()).toEqual([{ from_period: '2026-02', plan: 'starter' }]);
    await expect(db.sql`select platform.change_plan('acct_nobody', 'pro')`).rejects.toMatchObject({ code: 'SB400' });
  });
});
