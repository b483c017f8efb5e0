import { createRoute, z } from '@hono/zod-openapi';
import { stripeClientFromEnv } from '../../platform/billing/adapters/stripe-billing.ts';
import { handleDepotWebhook } from '../../platform/build/depot-webhook.ts';
import { DEPOT_SIGNATURE_HEADER } from '../../platform/build/depot-webhook-signature.ts';
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

/**
 * Depot's build-finished webhook (the format is ours: Depot documents none; docs/platform-jobs.md).
 * No bearer token: the Depot-Signature header (HMAC-SHA256 with DEPOT_WEBHOOK_SECRET over the
 * timestamp and the raw body, 300 s tolerance either way) is the authentication; a bad, missing
 * or replayed signature answers 400 `bad_signature`, a signed event without its fields 400
 * `invalid_event` naming the field, and neither writes anything. A signed event about a build no
 * live build job follows answers 200 and writes nothing (Depot would retry anything else, and a
 * retry cannot make the build ours). Without the secret: 503, and builds finish by polling.
 */
mount(webhooks, createRoute({
  method: 'post', path: '/webhooks/depot', tags: ['platform'],
  summary: "Depot's build-finished events, authenticated by the Depot-Signature header (no bearer token)",
  middleware: [limitBody(64 * 1024)],
  request: {
    headers: z.object({ [DEPOT_SIGNATURE_HEADER]: z.string().openapi({ description: 't=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">' }) }),
    body: { required: true, content: { 'application/json': { schema: z.record(z.string(), z.unknown()).openapi({ description: '{id, type: "build.finished", created, data: {projectId, buildId, status}}' }) } } },
  },
  responses: {
    200: jsonAnswer(z.record(z.string(), z.unknown()), 'the event woke its build job, was kept for its next wait, or was not one this Worker acts on (outcome says which)'),
    ...errorAnswers(400, 413, 503),
  },
}), async (c) => {
    const secret = typeof c.env.DEPOT_WEBHOOK_SECRET === 'string' ? c.env.DEPOT_WEBHOOK_SECRET : '';
    if (!secret) throw new HttpError(503, 'not_configured', 'Depot webhooks are not configured: set DEPOT_WEBHOOK_SECRET (builds finish by polling meanwhile)');
    const raw = await c.req.text();
    const inv = await invocationOf(c);
    const projectId = typeof c.env.DEPOT_PROJECT_ID === 'string' && c.env.DEPOT_PROJECT_ID ? c.env.DEPOT_PROJECT_ID : undefined;
    const result = await handleDepotWebhook(inv.sql, raw, c.req.header(DEPOT_SIGNATURE_HEADER), secret, { projectId });
    if (result.status === 400) return c.json(errorBody(result.body.code, result.body.error, result.body.field), 400);
    return c.json(result.body, 200);
});
