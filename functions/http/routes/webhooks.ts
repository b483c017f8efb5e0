import { createRoute, z } from '@hono/zod-openapi';
import { stripeClientFromEnv } from '../../platform/billing/adapters/stripe-billing.ts';
import { handleStripeWebhook } from '../../platform/billing/stripe-webhook.ts';
import { limitBody } from '../body.ts';
import { invocationOf } from '../context.ts';
import { errorBody, HttpError } from '../errors.ts';
import { createRouter, errorAnswers, jsonAnswer, mount } from '../openapi.ts';

export const webhooks = createRouter();

/**
 * Stripe's events. No bearer token: the Stripe-Signature header over the raw body is the
 * authentication (checked with constructEventAsync, 300 s tolerance, so a replayed old delivery
 * is refused, and at most 300 s of clock skew ahead); a bad signature answers 400 `bad_signature`,
 * a signed event without the fields it is acted on by 400 `invalid_event` naming the field, and
 * neither changes anything.
 */
mount(webhooks, createRoute({
  method: 'post', path: '/webhooks/stripe', tags: ['platform'],
  summary: "Stripe's events, authenticated by the Stripe-Signature header (no bearer token)",
  middleware: [limitBody(512 * 1024)],
  request: {
    headers: z.object({ 'stripe-signature': z.string().openapi({ description: 'Stripe\'s signature over the raw body' }) }),
    body: { required: true, content: { 'application/json': { schema: z.record(z.string(), z.unknown()).openapi({ description: 'a Stripe event, as Stripe sends it' }) } } },
  },
  responses: {
    200: jsonAnswer(z.record(z.string(), z.unknown()), 'the event was acted on, or was not one this Worker acts on'),
    ...errorAnswers(400, 413, 503),
  },
}), async (c) => {
    const secret = typeof c.env.STRIPE_WEBHOOK_SECRET === 'string' ? c.env.STRIPE_WEBHOOK_SECRET : '';
    const stripe = stripeClientFromEnv(c.env);
    if (!secret || !stripe) {
      throw new HttpError(503, 'not_configured', 'Stripe webhooks are not configured: set STRIPE_WEBHOOK_SECRET and STRIPE_SECRET_KEY');
    }
    const raw = await c.req.text();
    const inv = await invocationOf(c);
    const result = await handleStripeWebhook(inv.sql, stripe, raw, c.req.header('stripe-signature'), secret);
    if (result.status === 400) return c.json(errorBody(result.body.code ?? 'bad_signature', result.body.error, result.body.field), 400);
    return c.json(result.body, 200);
});
