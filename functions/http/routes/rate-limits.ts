import { createRoute, z } from '@hono/zod-openapi';
import { listRateLimits, resumeRateKey, type RateLimitState } from '../../../queue/index.ts';
import { requireScope } from '../auth.ts';
import { limitBody, readJson } from '../body.ts';
import { invocationOf } from '../context.ts';
import { AUTH_ERRORS, bearer, createRouter, errorAnswers, jsonAnswer, jsonBody, mount } from '../openapi.ts';

/**
 * The rate keys over HTTP (docs/engine.md, "Flow control"): each key's limit, how full its window
 * is and a provider's pause (a 429's), and ending such a pause now. The one implementation is
 * listRateLimits / worker.resume_rate_key, as for the CLI. Reading takes the admin or metrics
 * scope (as GET /v1/pauses); resuming, admin.
 */
export const rateLimits = createRouter();

const RESUME_MAX = 4 * 1024;
const time = z.string().openapi({ format: 'date-time' });
const rateLimitSchema = z.object({
  key: z.string(),
  limit: z.number().int(),
  perMs: z.number().int().openapi({ description: 'the window, in milliseconds' }),
  startedInWindow: z.number().int().openapi({ description: "steps of the key's jobs started in the window ending now" }),
  pausedUntil: time.nullable().openapi({ description: "while a provider's 429 holds the key: claims skip its jobs until then" }),
  pauseReason: z.string().nullable(),
  queued: z.number().int().openapi({ description: "the key's queued jobs (due or not)" }),
});
const resumeBody = z.strictObject({
  key: z.string().min(1).max(200),
  resumedBy: z.string().trim().min(1).max(200).optional().openapi({ description: 'who resumes (default: "http"); in each resumed job\'s history' }),
});
const resumedSchema = z.object({
  key: z.string(),
  pausedUntil: time.openapi({ description: 'the end the pause had' }),
  pauseReason: z.string().nullable(),
  jobsDue: z.number().int().openapi({ description: "jobs a 429 of the key had queued for the pause's end, due now" }),
});
const rateLimitJson = (r: RateLimitState) => ({ ...r, pausedUntil: r.pausedUntil?.toISOString() ?? null });

mount(rateLimits, createRoute({
  method: 'get', path: '/v1/rate-limits', tags: ['operator'], security: bearer,
  summary: "Every rate key: its limit, the starts in its window, a provider's pause",
  middleware: [requireScope('admin', 'metrics')],
  responses: { 200: jsonAnswer(z.object({ rateLimits: z.array(rateLimitSchema) }), 'the rate keys, by key'), ...errorAnswers(...AUTH_ERRORS) },
}), async (c) => {
  const inv = await invocationOf(c);
  return c.json({ rateLimits: (await listRateLimits(inv.sql)).map(rateLimitJson) });
});

mount(rateLimits, createRoute({
  method: 'post', path: '/v1/rate-limits/resume', tags: ['operator'], security: bearer,
  summary: "End a rate key's pause now: claims take its jobs again, within its limit",
  middleware: [requireScope('admin'), limitBody(RESUME_MAX)],
  request: { body: { ...jsonBody(resumeBody), required: true } },
  responses: { 200: jsonAnswer(z.object({ resumed: resumedSchema }), 'the pause that ended'), ...errorAnswers(400, 404, 409, 413, ...AUTH_ERRORS) },
}), async (c) => {
  const body = await readJson(c, resumeBody);
  const inv = await invocationOf(c);
  const resumed = await resumeRateKey(inv.sql, body.key, body.resumedBy ?? 'http');
  return c.json({ resumed: { ...resumed, pausedUntil: resumed.pausedUntil.toISOString() } });
});
