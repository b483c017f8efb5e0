import { parseArgs } from 'node:util';
import { openServer } from '../bench/server.ts';
import { createStripeClient, StripeBilling } from '../functions/platform/billing/adapters/stripe-billing.ts';
import { billingCronJob } from '../functions/platform/billing/billing-cron.ts';
import { invoiceAccountJob } from '../functions/platform/billing/invoice-account.ts';
import { connect, enqueue, getJob, JobRegistry, runSteps, TERMINAL_STATUSES, type JobStatus } from '../queue/index.ts';
import { migrate } from '../queue/migrate.ts';
import { startSandbox } from '../sandbox/server.ts';
import { stripeSandbox } from '../sandbox/stripe.ts';

/**
 * How many Worker ticks a month-end run needs: N accounts invoiced through the real `stripe` SDK
 * against the sandbox Stripe, driven only by `runSteps` "ticks" the way the Worker's per-minute
 * Cron Trigger drives them (each tick: `--invocations` overlapping invocations, each running up
 * to `--concurrency` steps at once for `--tick-budget-ms`; the pinned clock moves one minute per
 * tick). Not a test: it prints the ticks, the wall time and what the sandbox holds at the end.
 *
 *   node_modules/.bin/tsx scripts/bench-billing.ts [--accounts 10000] [--concurrency 4]
 *       [--invocations 1] [--tick-budget-ms 20000] [--poll-delay-ms 30000]
 *
 * DATABASE_URL (an admin URL that may create databases) or an embedded Postgres. The sandbox runs
 * in this process, so it shares the CPU with the runner: a conservative setting.
 */

const { values } = parseArgs({
  args: process.argv.slice(2),
  options: {
    accounts: { type: 'string', default: '10000' },
    concurrency: { type: 'string', default: '4' },
    invocations: { type: 'string', default: '1' },
    'tick-budget-ms': { type: 'string', default: '20000' },
    'poll-delay-ms': { type: 'string', default: '30000' },
  },
});
const accounts = Number(values.accounts);
const concurrency = Number(values.concurrency);
const invocations = Number(values.invocations);
const tickBudgetMs = Number(values['tick-budget-ms']);
const pollDelayMs = Number(values['poll-delay-ms']);
const TICK_MS = 60_000;
const MAX_TICKS = 10_000;

const server = await openServer();
const database = await server.freshDatabase('billing');
const sql = connect(database.url, { max: concurrency * invocations + 2 * invocations + 2 });
const sandbox = await startSandbox({ providers: [stripeSandbox()] });
try {
  await migrate(sql);
  const seedStarted = performance.now();
  await sql`insert into platform.plans (id, name, monthly_price_cents, included_credit_cents) values
              ('starter', 'Starter', 2000, 500), ('pro', 'Pro', 9900, 5000)`;
  // Every account: a plan, two usage metrics; every third: a dedicated database resized mid-month.
  await sql`insert into platform.accounts (id, stripe_customer_id, created_at)
            select 'acct_' || lpad(i::text, 6, '0'), 'cus_bench_' || i, '2026-01-01' from generate_series(1, ${accounts}) i`;
  await sql`insert into platform.account_plans (account_id, from_period, plan, changed_at)
            select id, '2026-01', case when right(id, 1) in ('0', '5') then 'pro' else 'starter' end, '2026-01-01' from platform.accounts`;
  await sql`insert into platform.usage_totals (account_id, period, metric, quantity, cents)
            select id, '2026-11', m.metric, 100, (hashtext(id || m.metric) & 1023) from platform.accounts, (values ('bandwidth_gb'), ('build_minutes')) m(metric)`;
  await sql`insert into platform.database_size_snapshots (database_id, account_id, cents_per_hour, effective_from)
            select 'db_' || id, id, s.rate, s.at from platform.accounts,
                   (values (2.083333, '2026-10-01'::timestamptz), (4.166667, '2026-11-16 12:00+00'::timestamptz)) s(rate, at)
             where right(id, 1)::int % 3 = 0`;
  const customers = Array.from({ length: accounts }, (_, i) => ({ id: `cus_bench_${i + 1}`, name: `acct_${String(i + 1).padStart(6, '0')}` }));
  await fetch(`${sandbox.url}/_sandbox/stripe/customers`, { method: 'POST', body: JSON.stringify(customers) });
  console.log(`seeded ${accounts} accounts in ${((performance.now() - seedStarted) / 1000).toFixed(1)} s`);

  const stripe = createStripeClient({ secretKey: 'sk_test_bench', apiBase: sandbox.url, maxNetworkRetries: 0 });
  const registry = new JobRegistry([billingCronJob({ pollDelayMs }), invoiceAccountJob({ billing: new StripeBilling(stripe) })]);
  let clock = new Date('2026-12-01T00:00:00Z');
  const { job: cron } = await enqueue(sql, { type: 'billing_cron', payload: { period: '2026-11' }, submitKey: 'billing_cron:2026-11', priority: 10 }, { now: clock });

  console.log(`ticks: ${invocations} invocation(s) × ${concurrency} steps at once, ${tickBudgetMs} ms budget each, clock +1 min per tick`);
  const started = performance.now();
  let ticks = 0;
  let steps = 0;
  let cronStatus: JobStatus = 'queued';
  while (!TERMINAL_STATUSES.includes(cronStatus) && ticks < MAX_TICKS) {
    ticks++;
    const tickStarted = performance.now();
    const counts = await Promise.all(
      Array.from({ length: invocations }, (_, i) =>
        runSteps({ sql, registry, workerId: `tick-${ticks}-${i}`, concurrency, clock: () => clock }, { budgetMs: tickBudgetMs }),
      ),
    );
    const claimed = counts.reduce((n, c) => n + c.claimed, 0);
    steps += claimed;
    const found = await getJob(sql, cron.id);
    if (!found) throw new Error(`the billing_cron job ${cron.id} is gone`);
    cronStatus = found.job.status;
    const [open] = await sql`select count(*)::int as n from platform.invoices where period = '2026-11' and status <> 'draft'`;
    console.log(`  tick ${ticks}: ${claimed} steps in ${((performance.now() - tickStarted) / 1000).toFixed(1)} s, ${open!.n} invoices finalized, billing_cron ${cronStatus}`);
    clock = new Date(clock.getTime() + TICK_MS);
  }
  const seconds = (performance.now() - started) / 1000;

  const [run] = await sql`select accounts, invoiced, failed, total_cents from platform.billing_runs where period = '2026-11'`;
  // Claims of the billing_cron job itself: 2 (the fan-out and the summary) when it is parked
  // while its invoice jobs run; every claim past those is a poll.
  const cronClaims = { n: (await getJob(sql, cron.id))!.events.filter((e) => e.kind === 'claimed').length };
  const state = (await (await fetch(`${sandbox.url}/_sandbox/stripe/state`)).json()) as { invoices: { total: number; status: string }[] };
  const atStripe = state.invoices.filter((i) => i.status === 'open');
  const stripeTotal = atStripe.reduce((sum, i) => sum + i.total, 0);
  const posts = sandbox.calls('stripe').filter((c) => c.method === 'POST').length;
  console.log(`
accounts invoiced: ${run?.invoiced ?? 0} of ${accounts} (${run?.failed ?? '?'} failed), billing_cron ${cronStatus}
billing_cron:      ${cronClaims!.n} claims (${Math.max(0, cronClaims!.n - 2)} polls)
ticks:             ${ticks} (${(ticks * TICK_MS) / 60_000} minutes of per-minute Cron Triggers)
wall time:         ${seconds.toFixed(1)} s (${Math.round((run?.invoiced ?? 0) / seconds)} invoices/s, ${Math.round(steps / seconds)} steps/s, ${steps} steps)
Stripe:            ${atStripe.length} open invoices, ${state.invoices.length} in all, ${posts} POSTs; total ${stripeTotal} ¢ vs. run summary ${run?.total_cents ?? '?'} ¢`);
  if (atStripe.length !== accounts || String(stripeTotal) !== String(run?.total_cents)) {
    console.error('MISMATCH: the sandbox does not hold exactly one invoice per account with the summary total');
    process.exitCode = 1;
  }
} finally {
  await sandbox.close();
  await sql.end({ timeout: 5 });
  await database.drop();
  await server.close();
}
