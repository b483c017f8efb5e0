import { createServer } from 'node:http';
import type Stripe from 'stripe';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStripeClient } from '../../functions/platform/billing/adapters/stripe-billing.ts';
import { handleStripeWebhook } from '../../functions/platform/billing/stripe-webhook.ts';
import type { SandboxHandle } from '../../sandbox/server.ts';
import { signStripePayload, stripeEventPayload } from '../../sandbox/stripe.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { createTestSandbox } from '../support/sandbox.ts';

const SECRET = 'whsec_test_billing';
const DEC_1_0100 = Date.parse('2026-12-01T01:00:00Z') / 1000;

let db: TestDatabase;
let sandbox: SandboxHandle;
let stripe: Stripe;

beforeAll(async () => {
  db = await createTestDatabase();
  sandbox = await createTestSandbox();
  stripe = createStripeClient({ secretKey: 'sk_test_webhooks', apiBase: sandbox.url, maxNetworkRetries: 0 });
  const { sql } = db;
  await sql`insert into platform.plans (id, name, monthly_price_cents, included_credit_cents) values ('starter', 'Starter', 2000, 500)`;
  await sql`select platform.create_account('acct_w', 'starter', 'cus_w', '2026-01-01'::timestamptz)`;
  await sql`insert into platform.invoices (account_id, period, plan, stripe_customer_id, stripe_invoice_id, lines, total_cents, currency, status)
            values ('acct_w', '2026-11', 'starter', 'cus_w', 'in_w', '[]', 2000, 'usd', 'open')`;
  await sql`insert into platform.services (id, account_id, desired_state) values
              ('svc_w1', 'acct_w', '{"image": "registry/w1:1"}'), ('svc_w2', 'acct_w', '{"image": "registry/w2:1"}')`;
});

const invoiceEvent = (type: string, options: { id: string; created?: number; invoice?: string; customer?: string }) =>
  stripeEventPayload(type, { id: options.invoice ?? 'in_w', object: 'invoice', customer: options.customer ?? 'cus_w', status: type === 'invoice.paid' ? 'paid' : 'open' }, {
    id: options.id,
    created: options.created ?? DEC_1_0100,
  });

function deliver(body: string, signature: string | null | undefined, now = new Date()) {
  return handleStripeWebhook(db.sql, stripe, body, signature, SECRET, { now });
}

async function account() {
  const [row] = await db.sql`select status, payment_failed_at, suspended_at from platform.accounts where id = 'acct_w'`;
  return row!;
}

async function snapshot() {
  return {
    accounts: await db.sql`select * from platform.accounts order by id`,
    invoices: await db.sql`select * from platform.invoices order by id`,
    services: await db.sql`select * from platform.services order by id`,
    events: await db.sql`select * from platform.stripe_events order by id`,
  };
}

describe('POST /webhooks/stripe (handleStripeWebhook)', () => {
  it('marks the account payment_failed, at the time of the event, on invoice.payment_failed', async () => {
    const body = invoiceEvent('invoice.payment_failed', { id: 'evt_fail_1' });
    const result = await deliver(body, signStripePayload(body, SECRET));
    expect(result).toEqual({ status: 200, body: { received: true, eventId: 'evt_fail_1', type: 'invoice.payment_failed', outcome: 'applied', accountId: 'acct_w' } });
    expect(await account()).toMatchObject({ status: 'payment_failed', payment_failed_at: new Date(DEC_1_0100 * 1000) });
    const [invoice] = await db.sql`select payment_failed_at from platform.invoices where stripe_invoice_id = 'in_w'`;
    expect(invoice!.payment_failed_at).toEqual(new Date(DEC_1_0100 * 1000));
  });

  it('acknowledges a redelivered event without applying it again', async () => {
    const before = await snapshot();
    const body = invoiceEvent('invoice.payment_failed', { id: 'evt_fail_1', created: DEC_1_0100 + 999 });
    const result = await deliver(body, signStripePayload(body, SECRET));
    expect(result).toMatchObject({ status: 200, body: { outcome: 'duplicate' } });
    expect(await snapshot()).toEqual(before);
  });

  it('keeps the first failure time when a second failure arrives', async () => {
    const body = invoiceEvent('invoice.payment_failed', { id: 'evt_fail_2', created: DEC_1_0100 + 86_400 });
    expect((await deliver(body, signStripePayload(body, SECRET))).status).toBe(200);
    expect((await account()).payment_failed_at).toEqual(new Date(DEC_1_0100 * 1000));
  });

  it.each([
    ['a signature made with another secret', (body: string) => ({ body, signature: signStripePayload(body, 'whsec_attacker') })],
    ['a body changed after signing', (body: string) => ({ body: body.replace('"cus_w"', '"cus_other"'), signature: signStripePayload(body, SECRET) })],
    ['no signature header', (body: string) => ({ body, signature: null })],
    ['a malformed signature header', (body: string) => ({ body, signature: 'garbage' })],
    // a genuine request captured and replayed later: its signed timestamp is past the 300 s tolerance
    ['a replayed request whose timestamp is 10 minutes old', (body: string) => ({ body, signature: signStripePayload(body, SECRET, Math.floor(Date.now() / 1000) - 600) })],
  ])('rejects %s with 400 and changes nothing', async (_case, make) => {
    const before = await snapshot();
    const { body, signature } = make(invoiceEvent('invoice.paid', { id: 'evt_forged' }));
    const result = await deliver(body, signature);
    expect(result.status).toBe(400);
    expect((result.body as { error: string }).error).toMatch(/signature|Stripe-Signature/i);
    expect(await snapshot()).toEqual(before);
  });

  it('takes a timestamp up to 300 s ahead of its clock and refuses one 301 s ahead, changing nothing', async () => {
    const at = new Date(DEC_1_0100 * 1000);
    const body = invoiceEvent('customer.updated', { id: 'evt_skew' });
    expect(await deliver(body, signStripePayload(body, SECRET, DEC_1_0100 + 300), at)).toMatchObject({ status: 200, body: { outcome: 'ignored' } });
    const before = await snapshot();
    expect(await deliver(body, signStripePayload(body, SECRET, DEC_1_0100 + 301), at)).toEqual({
      status: 400,
      body: { error: 'Stripe signature verification failed: the timestamp is 301 s in the future (more than 300 s of clock skew)' },
    });
    expect(await snapshot()).toEqual(before);
  });

  it('says the timestamp is the problem for an old request', async () => {
    const body = invoiceEvent('invoice.paid', { id: 'evt_old' });
    const result = await deliver(body, signStripePayload(body, SECRET, DEC_1_0100), new Date((DEC_1_0100 + 301) * 1000));
    expect(result).toEqual({ status: 400, body: { error: 'Stripe signature verification failed: Timestamp outside the tolerance zone' } });
  });

  it('clears the account on invoice.paid and resumes the services suspended for non-payment only', async () => {
    // As the cleanup sweep leaves it: account suspended, svc_w1 suspended by the sweep; svc_w2 by an operator.
    await db.sql`update platform.accounts set status = 'suspended', suspended_at = now() where id = 'acct_w'`;
    await db.sql`update platform.services set desired_state = desired_state || '{"suspended": true, "suspendedReason": "payment_failed", "suspendedAt": "2026-12-08T00:00:00Z"}' where id = 'svc_w1'`;
    await db.sql`update platform.services set desired_state = desired_state || '{"suspended": true, "suspendedReason": "abuse"}' where id = 'svc_w2'`;
    const body = invoiceEvent('invoice.paid', { id: 'evt_paid_1', created: DEC_1_0100 + 9 * 86_400 });
    expect(await deliver(body, signStripePayload(body, SECRET))).toMatchObject({ status: 200, body: { outcome: 'applied' } });
    expect(await account()).toEqual({ status: 'active', payment_failed_at: null, suspended_at: null });
    const services = await db.sql`select id, desired_state from platform.services order by id`;
    expect(services).toEqual([
      { id: 'svc_w1', desired_state: { image: 'registry/w1:1' } },
      { id: 'svc_w2', desired_state: { image: 'registry/w2:1', suspended: true, suspendedReason: 'abuse' } },
    ]);
    const [invoice] = await db.sql`select status, paid_at, payment_failed_at from platform.invoices where stripe_invoice_id = 'in_w'`;
    expect(invoice).toEqual({ status: 'paid', paid_at: new Date((DEC_1_0100 + 9 * 86_400) * 1000), payment_failed_at: null });
  });

  it('ignores a failure that arrives after the invoice was paid (out of order)', async () => {
    const body = invoiceEvent('invoice.payment_failed', { id: 'evt_fail_late', created: DEC_1_0100 + 3600 });
    expect(await deliver(body, signStripePayload(body, SECRET))).toMatchObject({ status: 200, body: { outcome: 'stale' } });
    expect((await account()).status).toBe('active');
  });

  it('acknowledges events it does not act on', async () => {
    const other = stripeEventPayload('customer.updated', { id: 'cus_w', object: 'customer' }, { id: 'evt_other' });
    expect(await deliver(other, signStripePayload(other, SECRET))).toMatchObject({ status: 200, body: { outcome: 'ignored' } });
    const stranger = invoiceEvent('invoice.payment_failed', { id: 'evt_stranger', customer: 'cus_unknown', invoice: 'in_unknown' });
    expect(await deliver(stranger, signStripePayload(stranger, SECRET))).toMatchObject({ status: 200, body: { outcome: 'ignored' } });
    expect((await account()).status).toBe('active');
  });
});

describe('sandbox Stripe delivering signed events to the handler', () => {
  let server: ReturnType<typeof createServer>;
  let url: string;
  beforeAll(async () => {
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', async () => {
        const result = await deliver(Buffer.concat(chunks).toString('utf8'), req.headers['stripe-signature'] as string | undefined);
        res.writeHead(result.status, { 'content-type': 'application/json' }).end(JSON.stringify(result.body));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as { port: number }).port}/webhooks/stripe`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('follows a failed and then a successful payment attempt', async () => {
    const customer = await stripe.customers.create({ name: 'acct_e2e' });
    await db.sql`select platform.create_account('acct_e2e', 'starter', ${customer.id}, '2026-01-01'::timestamptz)`;
    const invoice = await stripe.invoices.create({ customer: customer.id });
    await stripe.invoiceItems.create({ customer: customer.id, invoice: invoice.id, amount: 2000, currency: 'usd' });
    await stripe.invoices.finalizeInvoice(invoice.id);
    await db.sql`insert into platform.invoices (account_id, period, plan, stripe_customer_id, stripe_invoice_id, lines, total_cents, currency, status)
                 values ('acct_e2e', '2026-11', 'starter', ${customer.id}, ${invoice.id}, '[]', 2000, 'usd', 'open')`;
    await fetch(`${sandbox.url}/_sandbox/stripe/webhook`, { method: 'POST', body: JSON.stringify({ url, secret: SECRET }) });

    const attempt = async (outcome: string) =>
      (await (await fetch(`${sandbox.url}/_sandbox/stripe/invoices/${invoice.id}/pay`, { method: 'POST', body: JSON.stringify({ outcome }) })).json()) as { delivery: { status: number } };
    expect((await attempt('failed')).delivery.status).toBe(200);
    const [failed] = await db.sql`select status from platform.accounts where id = 'acct_e2e'`;
    expect(failed!.status).toBe('payment_failed');
    expect((await attempt('succeeded')).delivery.status).toBe(200);
    const [paid] = await db.sql`select a.status, i.status as invoice_status from platform.accounts a join platform.invoices i on i.account_id = a.id where a.id = 'acct_e2e'`;
    expect(paid).toEqual({ status: 'active', invoice_status: 'paid' });
  });
});
