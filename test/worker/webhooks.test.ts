import { beforeAll, describe, expect, it } from 'vitest';
import { signStripePayload, stripeEventPayload } from '../../sandbox/stripe.ts';
import { createWorkerHarness, type WorkerHarness } from './support.ts';

let h: WorkerHarness;
const SECRET = 'whsec_worker_test';
beforeAll(async () => {
  h = await createWorkerHarness({ STRIPE_SECRET_KEY: 'sk_test_worker', STRIPE_WEBHOOK_SECRET: SECRET } as never);
  await h.sql`insert into platform.plans (id, name, monthly_price_cents, included_credit_cents) values ('starter', 'Starter', 2000, 500)`;
  await h.sql`select platform.create_account('acct_hook', 'starter', 'cus_hook', '2026-01-01'::timestamptz)`;
});

async function deliver(body: string, signature: string | null) {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (signature !== null) headers['stripe-signature'] = signature;
  return h.request('/webhooks/stripe', { method: 'POST', token: null, headers, body });
}
const status = async () => (await h.sql`select status from platform.accounts where id = 'acct_hook'`)[0]!.status;

describe('POST /webhooks/stripe', () => {
  it('refuses a bad, missing or replayed signature with 400 and changes nothing', async () => {
    const body = stripeEventPayload('invoice.payment_failed', { id: 'in_1', object: 'invoice', customer: 'cus_hook' });
    expect((await deliver(body, signStripePayload(body, 'whsec_wrong'))).status).toBe(400);
    expect((await deliver(body, null)).status).toBe(400);
    const old = Math.floor(Date.now() / 1000) - 3600;
    expect((await deliver(body, signStripePayload(body, SECRET, old))).status).toBe(400);
    const tampered = body.replace('cus_hook', 'cus_other');
    expect((await deliver(tampered, signStripePayload(body, SECRET))).status).toBe(400);
    expect(await status()).toBe('active');
  });

  it('marks the account payment_failed on invoice.payment_failed and clears it on invoice.paid', async () => {
    const failed = stripeEventPayload('invoice.payment_failed', { id: 'in_2', object: 'invoice', customer: 'cus_hook' });
    const res = await deliver(failed, signStripePayload(failed, SECRET));
    expect(res.status).toBe(200);
    expect(await status()).toBe('payment_failed');
    const paid = stripeEventPayload('invoice.paid', { id: 'in_2', object: 'invoice', customer: 'cus_hook' });
    expect((await deliver(paid, signStripePayload(paid, SECRET))).status).toBe(200);
    expect(await status()).toBe('active');
  });
});
