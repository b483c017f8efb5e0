import { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { z } from 'zod';
import { enqueueProvisionCluster, provisionClusterRequest, resumeBootstrappedCluster } from '../platform/provisioning/provision-cluster.ts';
import { enqueueProvisionDb, provisionDbRequest } from '../platform/provisioning/provision-db.ts';
import { requireScope } from './auth.ts';
import { readJson } from './body.ts';
import { invocationOf, type AppEnv } from './context.ts';
import { errorBody, HttpError } from './errors.ts';
import { jobJson } from './serialize.ts';
import { ownershipToHttp } from './tenancy.ts';

export const provisioning = new Hono<AppEnv>();

const small = bodyLimit({ maxSize: 16 * 1024, onError: (c) => c.json(errorBody('payload_too_large', 'the body is larger than 16384 bytes'), 413) });

/** An optional `Idempotency-Key` header makes a retried request return the job it created. */
function idempotencyKey(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  if (!/^[\x21-\x7e]{1,200}$/.test(header)) throw new HttpError(400, 'invalid_input', 'Idempotency-Key must be 1 to 200 visible ASCII characters', 'Idempotency-Key');
  return header;
}

provisioning.post('/v1/databases', requireScope('enqueue'), small, async (c) => {
  const body = await readJson(c, z.strictObject(provisionDbRequest.shape));
  const submitKey = idempotencyKey(c.req.header('idempotency-key'));
  const inv = await invocationOf(c);
  // 404 for an unknown account or service, 403 for another account's service: nothing written
  const { job, duplicate } = await enqueueProvisionDb(inv.sql, body, { submitKey: submitKey && `provision_db:${submitKey}` }).catch(ownershipToHttp);
  if (!duplicate) c.set('kick', true);
  return c.json({ job: jobJson(job), ...(duplicate ? { duplicate } : {}) }, duplicate ? 200 : 201);
});

provisioning.post('/v1/clusters', requireScope('enqueue'), small, async (c) => {
  const body = await readJson(c, z.strictObject(provisionClusterRequest.shape));
  const submitKey = idempotencyKey(c.req.header('idempotency-key'));
  const inv = await invocationOf(c);
  // 404 for an unknown account: nothing written
  const { job, duplicate } = await enqueueProvisionCluster(inv.sql, body, { submitKey: submitKey && `provision_cluster:${submitKey}` }).catch(ownershipToHttp);
  if (!duplicate) c.set('kick', true);
  return c.json({ job: jobJson(job), ...(duplicate ? { duplicate } : {}) }, duplicate ? 200 : 201);
});

/** An operator (or automation) ran `talosctl bootstrap`: resume the cluster's job. */
provisioning.post('/v1/clusters/:id/bootstrapped', requireScope('admin'), small, async (c) => {
  await readJson(c, z.strictObject({}), { emptyAsObject: true });
  const inv = await invocationOf(c);
  const job = await resumeBootstrappedCluster(inv.sql, c.req.param('id'));
  c.set('kick', true);
  return c.json({ job: jobJson(job) });
});
