import { createRoute, z } from '@hono/zod-openapi';
import { getJob, NotFoundError, sendEvent, signalJob, type Json } from '../../../queue/index.ts';
import { requireScope } from '../auth.ts';
import { limitBody, readJson } from '../body.ts';
import { invocationOf } from '../context.ts';
import { AUTH_ERRORS, bearer, createRouter, errorAnswers, idParam, jsonAnswer, jsonBody, mount } from '../openapi.ts';
import { jobJson } from '../serialize.ts';
import { jobSchema } from '../schemas.ts';

/**
 * Signals over HTTP (docs/engine.md, "Signals"): an event for one job, or for every job waiting
 * on (name, key). Admin scope, as the other operator actions: an event changes where a job's
 * workflow goes next, for whichever account owns it, and the enqueue scope is what a tenant's
 * automation holds.
 */
export const signals = createRouter();

const SIGNAL_MAX = 64 * 1024;
const eventFields = {
  name: z.string().trim().min(1).max(200).openapi({ description: 'the event: what happened (bootstrapped, build_finished, …)' }),
  key: z.string().min(1).max(500).optional().openapi({ description: 'the correlation key: which one (a cluster id, a build id)' }),
  payload: z.unknown().optional().openapi({ description: 'any JSON, handed to the resumed step as ctx.event.payload' }),
};
const signalBody = z.strictObject(eventFields);
const kept = z.number().int().nullable().openapi({ description: 'when no wait took the event: the id it is kept under, for the next wait on it' });

mount(signals, createRoute({
  method: 'post', path: '/v1/jobs/{id}/signal', tags: ['operator'], security: bearer,
  summary: "Send an event to one job: its wait on it resumes now, or the job's next wait on it takes it",
  middleware: [requireScope('admin'), limitBody(SIGNAL_MAX)],
  request: { params: idParam, body: { ...jsonBody(signalBody), required: true } },
  responses: {
    200: jsonAnswer(z.object({ job: jobSchema, delivered: z.boolean(), keptEventId: kept }), 'the job after the event'),
    ...errorAnswers(400, 404, 409, 413, ...AUTH_ERRORS),
  },
}), async (c) => {
  const body = await readJson(c, signalBody);
  const inv = await invocationOf(c);
  const id = c.req.param('id');
  const answer = await signalJob(inv.sql, id, body.name, { key: body.key, payload: body.payload as Json | undefined });
  const found = await getJob(inv.sql, id);
  if (!found) throw new NotFoundError(`no job ${id}`);
  c.set('kick', answer.delivered.length > 0);
  return c.json({ job: jobJson(found.job, inv.scrub), delivered: answer.delivered.length > 0, keptEventId: answer.keptEventId });
});

mount(signals, createRoute({
  method: 'post', path: '/v1/events', tags: ['operator'], security: bearer,
  summary: 'Send an event to every job waiting on (name, key); kept for the next wait on it when none is',
  middleware: [requireScope('admin'), limitBody(SIGNAL_MAX)],
  request: { body: { ...jsonBody(signalBody), required: true } },
  responses: {
    200: jsonAnswer(z.object({ delivered: z.array(z.string()).openapi({ description: 'the jobs whose wait took it' }), keptEventId: kept }), 'where the event went'),
    ...errorAnswers(400, 413, ...AUTH_ERRORS),
  },
}), async (c) => {
  const body = await readJson(c, signalBody);
  const inv = await invocationOf(c);
  const answer = await sendEvent(inv.sql, body.name, { key: body.key, payload: body.payload as Json | undefined });
  c.set('kick', answer.delivered.length > 0);
  return c.json(answer);
});
