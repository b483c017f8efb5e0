import Stripe from 'stripe';
import { beforeAll, describe, expect, it } from 'vitest';
import { createStripeClient, stripeClientFromEnv } from '../../functions/platform/billing/adapters/stripe-billing.ts';
import type { SandboxHandle } from '../../sandbox/server.ts';
import { decodeStripeForm } from '../../sandbox/stripe.ts';
import { createTestSandbox } from '../support/sandbox.ts';

/** The sandbox Stripe speaks Stripe's API the way the SDK and Stripe's idempotency rules expect. */

let sandbox: SandboxHandle;
let stripe: Stripe;
let customer: string;

beforeAll(async () => {
  sandbox = await createTestSandbox();
  stripe = createStripeClient({ secretKey: 'sk_test_semantics', apiBase: sandbox.url, maxNetworkRetries: 0 });
  customer = (await stripe.customers.create({ name: 'Semantics', metadata: { starbase_account: 'acct_s' } })).id;
});

/** A raw form POST, to see the status and headers the SDK hides. */
async function post(path: string, form: Record<string, string>, key?: string, apiKey = 'sk_test_semantics') {
  const res = await fetch(`${sandbox.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/x-www-form-urlencoded', ...(key ? { 'idempotency-key': key } : {}) },
    body: new URLSearchParams(form).toString(),
  });
  return { status: res.status, replayed: res.headers.get('idempotent-replayed'), body: (await res.json()) as Record<string, any> };
}

describe('sandbox Stripe', () => {
  it('decodes Stripe form encoding into nested parameters', () => {
    expect(decodeStripeForm('customer=cus_1&metadata[a]=1&period[start]=5&period[end]=9&expand[0]=lines&expand[1]=customer')).toEqual({
      customer: 'cus_1',
      metadata: { a: '1' },
      period: { start: '5', end: '9' },
      expand: ['lines', 'customer'],
    });
  });

  it('replays the first answer for the same key and parameters', async () => {
    const first = await post('/v1/invoices', { customer, 'metadata[k]': 'v' }, 'same-key');
    const again = await post('/v1/invoices', { 'metadata[k]': 'v', customer }, 'same-key'); // field order does not matter
    expect(first.status).toBe(200);
    expect(again).toMatchObject({ status: 200, replayed: 'true', body: { id: first.body.id } });
    const viaSdk = await stripe.invoices.create({ customer, metadata: { k: 'v' } }, { idempotencyKey: 'same-key' });
    expect(viaSdk.id).toBe(first.body.id);
  });

  it('answers idempotency_error for the same key with other parameters or another endpoint', async () => {
    await stripe.invoices.create({ customer, description: 'a' }, { idempotencyKey: 'reused-key' });
    const other = stripe.invoices.create({ customer, description: 'b' }, { idempotencyKey: 'reused-key' });
    await expect(other).rejects.toBeInstanceOf(Stripe.errors.StripeIdempotencyError);
    await expect(other).rejects.toMatchObject({ statusCode: 400, rawType: 'idempotency_error' });
    const elsewhere = await post('/v1/invoiceitems', { customer, amount: '1', currency: 'usd' }, 'reused-key');
    expect(elsewhere).toMatchObject({ status: 400, body: { error: { type: 'idempotency_error' } } });
    expect(elsewhere.body.error.message).toMatch(/same endpoint/);
  });

  it('saves nothing under a key whose request failed validation, and scopes keys per API key', async () => {
    const invalid = await post('/v1/invoices', {}, 'validation-key');
    expect(invalid).toMatchObject({ status: 400, body: { error: { type: 'invalid_request_error', param: 'customer' } } });
    const valid = await post('/v1/invoices', { customer }, 'validation-key');
    expect(valid).toMatchObject({ status: 200, replayed: null });
    const otherAccount = await post('/v1/invoices', { customer }, 'validation-key', 'sk_test_other');
    expect(otherAccount.status).toBe(200);
    expect(otherAccount.body.id).not.toBe(valid.body.id);
  });

  it('refuses unauthenticated calls, unknown customers and a second finalization', async () => {
    expect((await post('/v1/invoices', { customer }, undefined, 'nope')).status).toBe(401);
    await expect(stripe.invoices.create({ customer: 'cus_missing' })).rejects.toMatchObject({ statusCode: 404, code: 'resource_missing' });
    const invoice = await stripe.invoices.create({ customer, auto_advance: false });
    await stripe.invoiceItems.create({ customer, invoice: invoice.id, amount: 700, currency: 'usd' });
    const open = await stripe.invoices.finalizeInvoice(invoice.id, { auto_advance: true });
    expect(open).toMatchObject({ status: 'open', total: 700, amount_due: 700 });
    await expect(stripe.invoices.finalizeInvoice(invoice.id)).rejects.toMatchObject({ statusCode: 400, code: 'invoice_not_editable' });
    await expect(stripe.invoiceItems.create({ customer, invoice: invoice.id, amount: 1, currency: 'usd' })).rejects.toMatchObject({ statusCode: 400 });
  });

  it('pays an invoice with nothing due on finalization, as Stripe does', async () => {
    const invoice = await stripe.invoices.create({ customer });
    expect((await stripe.invoices.finalizeInvoice(invoice.id)).status).toBe('paid');
  });

  it('lists an invoice\'s items page by page, newest first, so the SDK auto-paginates', async () => {
    const invoice = await stripe.invoices.create({ customer });
    for (const line of ['a', 'b', 'c']) await stripe.invoiceItems.create({ customer, invoice: invoice.id, amount: 1, currency: 'usd', metadata: { starbase_line: line } });
    const page = await stripe.invoiceItems.list({ invoice: invoice.id, limit: 2 });
    expect(page.data.map((i) => i.metadata?.starbase_line)).toEqual(['c', 'b']);
    expect(page.has_more).toBe(true);
    const all: string[] = [];
    await stripe.invoiceItems.list({ invoice: invoice.id, limit: 2 }).autoPagingEach((i) => void all.push(i.metadata!.starbase_line!));
    expect(all).toEqual(['c', 'b', 'a']);
    const fetched = await stripe.invoices.retrieve(invoice.id);
    expect(fetched.lines.data.map((l) => l.parent?.invoice_item_details?.invoice_item)).toHaveLength(3);
  });

  it('is reached by the client the Worker builds from STRIPE_API_HOST / _PORT / _PROTOCOL', async () => {
    const url = new URL(sandbox.url);
    const fromEnv = stripeClientFromEnv({ STRIPE_SECRET_KEY: 'sk_test_env', STRIPE_API_HOST: url.hostname, STRIPE_API_PORT: url.port, STRIPE_API_PROTOCOL: 'http' });
    expect((await fromEnv!.customers.retrieve(customer)).id).toBe(customer);
    expect(stripeClientFromEnv({})).toBeNull();
    expect(() => stripeClientFromEnv({ STRIPE_SECRET_KEY: 'sk_x', STRIPE_API_PROTOCOL: 'ftp' })).toThrow(/STRIPE_API_PROTOCOL/);
  });

  it('records every call with its idempotency key and never the API key', () => {
    const calls = sandbox.calls('stripe');
    expect(calls.some((c) => c.headers['idempotency-key'] === 'same-key')).toBe(true);
    expect(JSON.stringify(calls)).not.toContain('sk_test_semantics');
  });
});
