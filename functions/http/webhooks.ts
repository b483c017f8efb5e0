import { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { stripeClientFromEnv } from '../platform/billing/adapters/stripe-billing.ts';
import { handleStripeWebhook } from '../platform/billing/stripe-webhook.ts';
import { invocationOf, type AppEnv } from './context.ts';
import { errorBody, HttpError } from './errors.ts';

export const webhooks = new Hono<AppEnv>();

/**
 * Stripe's events. No bearer token: the Stripe-Signature header over the raw body is the
 * authentication (checked with constructEventAsync, 300 s tolerance, so a replayed old delivery
 * is refused, and at most 300 s of clock skew ahead); a bad signature answers 400 `bad_signature`,
 * a signed event without the fields it is acted on by 400 `invalid_event` naming the field, and
 * neither changes anything.
 */
webhooks.post(
  '/webhooks/stripe',
  bodyLimit({ maxSize: 512 * 1024, onError: (c) => c.json(errorBody('payload_too_large', 'the body is larger than 524288 bytes'), 413) }),
  async (c) => {
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
  },
);
