import { Hono, type Context } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { z } from 'zod';
import { enqueue, getJob, NotFoundError, TERMINAL_STATUSES, type Job } from '../../queue/index.ts';
import type { WorkerEnv } from '../config.ts';
import { R2LogArchive } from '../platform/build/adapters/r2-log-archive.ts';
import { buildPayload } from '../platform/build/build.ts';
import { envSecrets } from '../invocation.ts';
import { scrubText } from '../lib/redact.ts';
import { assertOwnership } from '../lib/tenancy.ts';
import { requireScope } from './auth.ts';
import { readJson } from './body.ts';
import { invocationOf, type AppEnv } from './context.ts';
import { errorBody, HttpError } from './errors.ts';
import { ownershipToHttp } from './tenancy.ts';
import { jobJson } from './serialize.ts';

/** A second push for the same service and branch inside this window supersedes the first. */
export const PUSH_DEBOUNCE_MS = 5000;

export const builds = new Hono<AppEnv>();

/**
 * A git push: a `build` job, debounced per service and branch. The push carries its account,
 * which must exist and own the service: an unknown account or service is a 404, another
 * account's service a 403, and nothing is written (lib/tenancy.ts; the build's steps check
 * again, for jobs that reach them another way). The service row is key-share locked until the
 * job is enqueued, so a concurrent delete waits for the push.
 */
builds.post(
  '/v1/pushes',
  requireScope('enqueue'),
  bodyLimit({ maxSize: 16 * 1024, onError: (c) => c.json(errorBody('payload_too_large', 'the body is larger than 16384 bytes'), 413) }),
  async (c) => {
    const body = await readJson(c, z.strictObject(buildPayload.shape));
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
    return c.json({ job: jobJson(job), superseded }, 201);
  },
);

/**
 * A build's log (`:id` is the build job's id). While the build runs: a WebSocket upgrade joins
 * the live relay (JSON messages `{type:'lines', lines:[{seq,text}]}` then `{type:'end'}`), and a
 * plain GET answers what has been archived so far. After the build: the archive object.
 */
builds.get('/v1/builds/:id/logs', requireScope('enqueue', 'admin'), async (c) => {
  const inv = await invocationOf(c);
  const found = await getJob(inv.sql, c.req.param('id'));
  if (!found || found.job.type !== 'build') throw new NotFoundError(`no build ${c.req.param('id')}`);
  const running = !TERMINAL_STATUSES.includes(found.job.status);
  if (running && c.req.header('upgrade')?.toLowerCase() === 'websocket') {
    const relay = c.env.BUILD_LOG_RELAY;
    return relay.get(relay.idFromName(found.job.id)).fetch(c.req.raw);
  }
  if (!running && c.req.header('upgrade')?.toLowerCase() === 'websocket') {
    throw new HttpError(410, 'build_finished', 'the build has finished: GET this URL without an upgrade for its archived log');
  }
  return archivedLog(c, found.job);
});

/**
 * A build's archived log as plain text (what is archived so far while it runs); the dashboard
 * serves it too. The lines are the build's own output, HTML included: nosniff and a sandboxing CSP
 * keep a browser from ever rendering or running them, and no cache keeps a copy.
 */
export async function archivedLog<E extends { Bindings: WorkerEnv }>(c: Context<E>, build: Job): Promise<Response> {
  const archived = await new R2LogArchive(c.env.BUILD_LOGS).read(build.id);
  // Lines are scrubbed before they are archived; an archive written before that was not.
  return c.body(scrubText(archived?.text ?? '', envSecrets(c.env)), 200, {
    'content-type': 'text/plain; charset=utf-8',
    'x-content-type-options': 'nosniff',
    'content-security-policy': "default-src 'none'; sandbox",
    'cache-control': 'no-store',
    'x-build-status': build.status,
    'x-build-last-line': String(archived?.lastSeq ?? 0),
  });
}
