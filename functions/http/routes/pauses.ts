import { createRoute, z } from '@hono/zod-openapi';
import { listPauses, pauseClaims, resumeClaims, type Pause } from '../../../queue/index.ts';
import { requireScope } from '../auth.ts';
import { limitBody, readJson } from '../body.ts';
import { invocationOf } from '../context.ts';
import { AUTH_ERRORS, bearer, createRouter, errorAnswers, jsonAnswer, jsonBody, mount } from '../openapi.ts';

/**
 * Pause and resume a job type or a pool over HTTP (docs/engine.md, "Flow control"): claims skip
 * what is paused; queued jobs stay as they are and running ones finish. The one implementation is
 * worker.pause_claims / worker.resume_claims, as for the CLI. Admin scope, as the other operator
 * actions.
 */
export const pauses = createRouter();

const PAUSE_MAX = 4 * 1024;
const kind = z.enum(['type', 'pool']).openapi({ description: 'what is paused: a job type, or a pool (its runners claim nothing)' });
const pauseSchema = z.object({
  kind,
  name: z.string(),
  pausedBy: z.string(),
  pausedAt: z.string().openapi({ format: 'date-time' }),
  reason: z.string(),
});
const target = z.object({ kind: z.enum(['type', 'pool']), name: z.string().min(1).max(200) });
const pauseBody = z.strictObject({
  ...target.shape,
  reason: z.string().trim().min(1).max(1000).openapi({ description: 'why: shown in inspect, the metrics and the dashboard' }),
  pausedBy: z.string().trim().min(1).max(200).optional().openapi({ description: 'who pauses (default: "http")' }),
});
const resumeBody = z.strictObject(target.shape);
const pauseJson = (p: Pause) => ({ ...p, pausedAt: p.pausedAt.toISOString() });

mount(pauses, createRoute({
  method: 'get', path: '/v1/pauses', tags: ['operator'], security: bearer,
  summary: 'Every pause in force (types first)',
  middleware: [requireScope('admin', 'metrics')],
  responses: { 200: jsonAnswer(z.object({ pauses: z.array(pauseSchema) }), 'the pauses'), ...errorAnswers(...AUTH_ERRORS) },
}), async (c) => {
  const inv = await invocationOf(c);
  return c.json({ pauses: (await listPauses(inv.sql)).map(pauseJson) });
});

mount(pauses, createRoute({
  method: 'post', path: '/v1/pauses', tags: ['operator'], security: bearer,
  summary: 'Pause a job type or a pool: claims skip it until it is resumed',
  middleware: [requireScope('admin'), limitBody(PAUSE_MAX)],
  request: { body: { ...jsonBody(pauseBody), required: true } },
  responses: { 201: jsonAnswer(z.object({ pause: pauseSchema }), 'paused'), ...errorAnswers(400, 404, 409, 413, ...AUTH_ERRORS) },
}), async (c) => {
  const body = await readJson(c, pauseBody);
  const inv = await invocationOf(c);
  const pause = await pauseClaims(inv.sql, { kind: body.kind, name: body.name, pausedBy: body.pausedBy ?? 'http', reason: body.reason });
  return c.json({ pause: pauseJson(pause) }, 201);
});

mount(pauses, createRoute({
  method: 'post', path: '/v1/pauses/resume', tags: ['operator'], security: bearer,
  summary: 'Resume a paused job type or pool: claims take it again',
  middleware: [requireScope('admin'), limitBody(PAUSE_MAX)],
  request: { body: { ...jsonBody(resumeBody), required: true } },
  responses: { 200: jsonAnswer(z.object({ resumed: pauseSchema }), 'the pause that ended'), ...errorAnswers(400, 409, 413, ...AUTH_ERRORS) },
}), async (c) => {
  const body = await readJson(c, resumeBody);
  const inv = await invocationOf(c);
  return c.json({ resumed: pauseJson(await resumeClaims(inv.sql, body.kind, body.name)) });
});
