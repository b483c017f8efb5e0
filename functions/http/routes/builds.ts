import { createRoute, z } from '@hono/zod-openapi';
import { enqueue, getJob, NotFoundError } from '../../../queue/index.ts';
import { archivedLog } from '../archived-log.ts';
import { isWebSocketUpgrade, joinBuildRelay } from '../build-log-socket.ts';
import { buildPayload } from '../../platform/build/build.ts';
import { assertOwnership } from '../../lib/tenancy.ts';
import { requireScope } from '../auth.ts';
import { limitBody, readJson } from '../body.ts';
import { invocationOf } from '../context.ts';
import { AUTH_ERRORS, bearer, createRouter, errorAnswers, idParam, jsonAnswer, jsonBody, mount } from '../openapi.ts';
import { jobSchema } from '../schemas.ts';
import { ownershipToHttp } from '../tenancy.ts';
import { jobJson } from '../serialize.ts';

/** A second push for the same service and branch inside this window supersedes the first. */
export const PUSH_DEBOUNCE_MS = 5000;

export const builds = createRouter();

const pushBody = z.strictObject(buildPayload.shape);

/**
 * A git push: a `build` job, debounced per service and branch. The push carries its account,
 * which must exist and own the service: an unknown account or service is a 404, another
 * account's service a 403, and nothing is written (lib/tenancy.ts; the build's steps check
 * again, for jobs that reach them another way). The service row is key-share locked until the
 * job is enqueued, so a concurrent delete waits for the push.
 */
mount(builds, createRoute({
  method: 'post', path: '/v1/pushes', tags: ['platform'], security: bearer,
  summary: 'A git push: enqueue a build, debounced per service and branch',
  middleware: [requireScope('enqueue'), limitBody(16 * 1024)],
  request: { body: jsonBody(pushBody) },
  responses: {
    201: jsonAnswer(z.object({ job: jobSchema, superseded: z.string().nullable().openapi({ description: 'the waiting build this push superseded, if any' }) }), 'the build job'),
    ...errorAnswers(400, 404, 413, ...AUTH_ERRORS),
  },
}), async (c) => {
    const body = await readJson(c, pushBody);
    const inv = await invocationOf(c);
    const { job, superseded } = await inv.sql.begin(async (tx) => {
      await assertOwnership(tx, body.accountId, body.serviceId, { lockService: true }).catch(ownershipToHttp);
      return enqueue(tx, {
        type: 'build',
        payload: body,
        dedupeKey: `deploy:${body.serviceId}:${body.branch}`,
        delayMs: PUSH_DEBOUNCE_MS,
      });
    });
    return c.json({ job: jobJson(job, inv.scrub), superseded }, 201);
});

/**
 * A build's log (`:id` is the build job's id). While the build runs: a WebSocket upgrade joins
 * the live relay (JSON messages `{type:'lines', lines:[{seq,text}]}` then `{type:'end'}`), and a
 * plain GET answers what has been archived so far. After the build: the archive object.
 */
mount(builds, createRoute({
  method: 'get', path: '/v1/builds/{id}/logs', tags: ['platform'], security: bearer,
  summary: "A build's log: the live relay over a WebSocket upgrade while it runs, else the archived text",
  middleware: [requireScope('enqueue', 'admin')],
  request: { params: idParam },
  responses: {
    200: { description: 'the archived log (x-build-status, x-build-last-line headers)', content: { 'text/plain': { schema: z.string() } } },
    101: { description: 'the live relay: JSON messages {type:"lines", lines:[{seq,text}]} then {type:"end"}' },
    ...errorAnswers(404, 410, ...AUTH_ERRORS),
  },
}), async (c) => {
  const inv = await invocationOf(c);
  const found = await getJob(inv.sql, c.req.param('id'));
  if (!found || found.job.type !== 'build') throw new NotFoundError(`no build ${c.req.param('id')}`);
  if (isWebSocketUpgrade(c.req.raw)) {
    return joinBuildRelay(c.env, found.job, c.req.raw, 'GET this URL without an upgrade for its archived log');
  }
  return archivedLog(c, found.job);
});
