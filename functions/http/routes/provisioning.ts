import { createRoute, z } from '@hono/zod-openapi';
import type { Context } from 'hono';
import type { Job } from '../../../queue/index.ts';
import { enqueueProvisionCluster, provisionClusterRequest, resumeBootstrappedCluster } from '../../platform/provisioning/provision-cluster.ts';
import { enqueueProvisionDb, provisionDbRequest } from '../../platform/provisioning/provision-db.ts';
import { requireScope } from '../auth.ts';
import { limitBody, readJson } from '../body.ts';
import { invocationOf, type AppEnv } from '../context.ts';
import { HttpError } from '../errors.ts';
import { AUTH_ERRORS, bearer, createRouter, errorAnswers, idParam, jsonAnswer, jsonBody, mount } from '../openapi.ts';
import { jobAnswer, jobSchema } from '../schemas.ts';
import { jobJson, type Scrub } from '../serialize.ts';
import { ownershipToHttp } from '../tenancy.ts';

export const provisioning = createRouter();

const small = limitBody(16 * 1024);

const idempotencyHeader = z.object({
  'idempotency-key': z.string().optional().openapi({ description: 'a retried request with the same key returns the job it created (200, duplicate: true)' }),
});

/** An enqueue of a provisioning job: 201 created, or 200 with `duplicate` for a repeated Idempotency-Key. */
function provisionRoute(path: string, summary: string, body: z.ZodType) {
  return createRoute({
    method: 'post', path, tags: ['platform'], security: bearer, summary,
    middleware: [requireScope('enqueue'), small],
    request: { headers: idempotencyHeader, body: jsonBody(body) },
    responses: {
      201: jsonAnswer(jobAnswer, 'the provisioning job'),
      200: jsonAnswer(jobAnswer, 'the job an earlier request with this Idempotency-Key created'),
      ...errorAnswers(400, 404, 413, ...AUTH_ERRORS),
    },
  });
}

/** 201 with the new job (drained right after), or 200 with the job an earlier request with this key created. */
function provisioned(c: Context<AppEnv>, scrub: Scrub, { job, duplicate }: { job: Job; duplicate: boolean }) {
  if (!duplicate) c.set('kick', true);
  return c.json({ job: jobJson(job, scrub), ...(duplicate ? { duplicate } : {}) }, duplicate ? 200 : 201);
}

const dbBody = z.strictObject(provisionDbRequest.shape);
const clusterBody = z.strictObject(provisionClusterRequest.shape);
const empty = z.strictObject({});

/** An optional `Idempotency-Key` header makes a retried request return the job it created. */
function idempotencyKey(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  if (!/^[\x21-\x7e]{1,200}$/.test(header)) throw new HttpError(400, 'invalid_input', 'Idempotency-Key must be 1 to 200 visible ASCII characters', 'Idempotency-Key');
  return header;
}

mount(provisioning, provisionRoute('/v1/databases', 'Provision a managed Postgres database for a service', dbBody), async (c) => {
  const body = await readJson(c, dbBody);
  const submitKey = idempotencyKey(c.req.header('idempotency-key'));
  const inv = await invocationOf(c);
  // 404 for an unknown account or service, 403 for another account's service: nothing written
  return provisioned(c, inv.scrub, await enqueueProvisionDb(inv.sql, body, { submitKey: submitKey && `provision_db:${submitKey}` }).catch(ownershipToHttp));
});

mount(provisioning, provisionRoute('/v1/clusters', 'Provision a Talos Kubernetes cluster for an account', clusterBody), async (c) => {
  const body = await readJson(c, clusterBody);
  const submitKey = idempotencyKey(c.req.header('idempotency-key'));
  const inv = await invocationOf(c);
  // 404 for an unknown account: nothing written
  return provisioned(c, inv.scrub, await enqueueProvisionCluster(inv.sql, body, { submitKey: submitKey && `provision_cluster:${submitKey}` }).catch(ownershipToHttp));
});

/** An operator (or automation) ran `talosctl bootstrap`: resume the cluster's job. */
mount(provisioning, createRoute({
  method: 'post', path: '/v1/clusters/{id}/bootstrapped', tags: ['platform'], security: bearer,
  summary: 'Resume a cluster job after `talosctl bootstrap`',
  middleware: [requireScope('admin'), small],
  request: { params: idParam, body: { ...jsonBody(empty), required: false } },
  responses: { 200: jsonAnswer(z.object({ job: jobSchema }), 'the resumed job'), ...errorAnswers(400, 404, 409, 413, ...AUTH_ERRORS) },
}), async (c) => {
  await readJson(c, empty, { emptyAsObject: true });
  const inv = await invocationOf(c);
  const job = await resumeBootstrappedCluster(inv.sql, c.req.param('id'));
  c.set('kick', true);
  return c.json({ job: jobJson(job, inv.scrub) });
});
