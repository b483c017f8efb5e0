import { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { z } from 'zod';
import type { Context } from 'hono';
import {
  cancelJob, decodeCursor, enqueue, enqueueBatch, failJobPermanently, getJob, JOB_STATUSES, listJobs, NotFoundError,
  releaseJobLease, requeueJob, rescheduleJob, setJobPriority, typeAccess, type EnqueueInput, type JsonObject, type Queryable,
} from '../../../queue/index.ts';
import type { WorkerEnv } from '../../config.ts';
import { requireScope, scopesOf } from '../auth.ts';
import { readJson, storableText } from '../body.ts';
import { invocationOf, type AppEnv } from '../context.ts';
import { errorBody, HttpError } from '../errors.ts';
import { eventJson, jobJson } from '../serialize.ts';

const key = z.string().min(1).max(200);
/** An ISO time Postgres can store: ISO allows year 0000, timestamptz starts at year 1 (4713 BC aside). */
const runAtField = z.iso
  .datetime({ offset: true })
  .refine((s) => new Date(s).getUTCFullYear() >= 1, 'runAt must be in year 1 or later');
export const enqueueSchema = z
  .strictObject({
    type: z.string().min(1).max(63),
    payload: z.record(z.string(), z.unknown()).optional(),
    priority: z.number().int().min(0).max(1000).optional(),
    runAt: runAtField.optional(),
    delayMs: z.number().int().min(0).max(365 * 86_400_000).optional(),
    maxAttempts: z.number().int().min(1).max(100).optional(),
    dedupeKey: key.optional(),
    submitKey: key.optional(),
    pool: z.string().min(1).max(100).optional(),
    weight: z.string().min(1).max(32).optional(),
    concurrencyKey: key.optional(),
    concurrencyLimit: z.number().int().min(1).max(10_000).optional(),
  })
  .refine((b) => !(b.runAt && b.delayMs !== undefined), { message: 'give runAt or delayMs, not both', path: ['delayMs'] });

export type EnqueueBody = z.infer<typeof enqueueSchema>;

export function toEnqueueInput(body: EnqueueBody): EnqueueInput {
  const { runAt, payload, ...rest } = body;
  return { ...rest, payload: (payload ?? {}) as JsonObject, ...(runAt ? { runAt: new Date(runAt) } : {}) };
}

const limitTooLarge = (c: Parameters<Parameters<typeof bodyLimit>[0]['onError'] & {}>[0], max: number) =>
  c.json(errorBody('payload_too_large', `the body is larger than ${max} bytes`), 413);
const SINGLE_MAX = 256 * 1024;
const BATCH_MAX = 4 * 1024 * 1024;

export const jobs = new Hono<AppEnv>();

/**
 * The generic routes enqueue a type only if it is public (queue/registry.ts `access`), or if the
 * token carries the admin scope: an internal type is the engine's own (a cron slot, a parent job)
 * or has its own route, which checks what the generic route cannot. Checked before anything is
 * written, so a batch with one refused element writes nothing. `fieldOf(i)` names the i-th type.
 */
async function refuseInternalTypes(c: Context<AppEnv>, sql: Queryable, types: string[], fieldOf: (i: number) => string): Promise<void> {
  const access = await typeAccess(sql, types);
  const refused = types.findIndex((t) => access.get(t)?.access === 'internal');
  if (refused < 0) return;
  const scopes = await scopesOf(c.env as WorkerEnv, c.req.header('authorization'));
  if (scopes?.includes('admin')) return;
  const type = types[refused]!;
  const via = access.get(type)!.enqueueVia;
  throw new HttpError(403, 'forbidden', `job type ${type} is internal: enqueue it through ${via ?? 'its own route'} (the admin token may enqueue it here)`, fieldOf(refused));
}

jobs.post('/v1/jobs/batch', requireScope('enqueue'), bodyLimit({ maxSize: BATCH_MAX, onError: (c) => limitTooLarge(c, BATCH_MAX) }), async (c) => {
  const body = await readJson(c, z.strictObject({ jobs: z.array(enqueueSchema).min(1).max(1000) }));
  const inv = await invocationOf(c);
  await refuseInternalTypes(c, inv.sql, body.jobs.map((j) => j.type), (i) => `jobs[${i}].type`);
  const results = await enqueueBatch(inv.sql, body.jobs.map(toEnqueueInput));
  c.set('kick', true);
  return c.json({ jobs: results.map((r) => jobJson(r.job)) }, 201);
});

jobs.post('/v1/jobs', requireScope('enqueue'), bodyLimit({ maxSize: SINGLE_MAX, onError: (c) => limitTooLarge(c, SINGLE_MAX) }), async (c) => {
  const body = await readJson(c, enqueueSchema);
  const inv = await invocationOf(c);
  await refuseInternalTypes(c, inv.sql, [body.type], () => 'type');
  const result = await enqueue(inv.sql, toEnqueueInput(body));
  if (result.duplicate) return c.json({ job: jobJson(result.job), duplicate: true }, 200);
  c.set('kick', true);
  return c.json({ job: jobJson(result.job) }, 201);
});

const listQuery = z.strictObject({
  status: z.enum(JOB_STATUSES).optional(),
  type: z.string().min(1).max(63).refine(storableText, 'contains a NUL character or an unpaired UTF-16 surrogate').optional(),
  limit: z.coerce.number().int().min(1).max(500).optional(),
  cursor: z.string().max(200).optional(),
});

jobs.get('/v1/jobs', requireScope('enqueue', 'admin'), async (c) => {
  const query = listQuery.parse(c.req.query());
  if (query.cursor !== undefined && !decodeCursor(query.cursor)) {
    throw new HttpError(400, 'invalid_input', 'cursor is not a cursor this API returned', 'cursor');
  }
  const inv = await invocationOf(c);
  const page = await listJobs(inv.sql, query);
  return c.json({ jobs: page.jobs.map(jobJson), nextCursor: page.nextCursor });
});

jobs.get('/v1/jobs/:id', requireScope('enqueue', 'admin'), async (c) => {
  const inv = await invocationOf(c);
  const found = await getJob(inv.sql, c.req.param('id'));
  if (!found) throw new NotFoundError(`no job ${c.req.param('id')}`);
  return c.json({ job: jobJson(found.job), events: found.events.map(eventJson) });
});

const ACTION_MAX = 16 * 1024;
const action = bodyLimit({ maxSize: ACTION_MAX, onError: (c) => limitTooLarge(c, ACTION_MAX) });

jobs.post('/v1/jobs/:id/cancel', requireScope('admin'), action, async (c) => {
  const body = await readJson(c, z.strictObject({ reason: z.string().min(1).max(1000).optional() }), { emptyAsObject: true });
  const inv = await invocationOf(c);
  const job = await cancelJob(inv.sql, c.req.param('id'), body.reason ?? 'cancelled over the API');
  c.set('kick', job.status !== 'cancelled'); // a started job runs its cancel hook on the next claim
  return c.json({ job: jobJson(job) });
});

jobs.post('/v1/jobs/:id/retry', requireScope('admin'), action, async (c) => {
  await readJson(c, z.strictObject({}), { emptyAsObject: true });
  const inv = await invocationOf(c);
  const job = await requeueJob(inv.sql, c.req.param('id'));
  c.set('kick', true);
  return c.json({ job: jobJson(job) });
});

jobs.post('/v1/jobs/:id/fail', requireScope('admin'), action, async (c) => {
  const body = await readJson(c, z.strictObject({ reason: z.string().trim().min(1).max(1000) }));
  const inv = await invocationOf(c);
  return c.json({ job: jobJson(await failJobPermanently(inv.sql, c.req.param('id'), body.reason)) });
});

jobs.post('/v1/jobs/:id/reschedule', requireScope('admin'), action, async (c) => {
  const body = await readJson(
    c,
    z.strictObject({ runAt: runAtField.optional(), delayMs: z.number().int().min(0).max(365 * 86_400_000).optional() })
      .refine((b) => (b.runAt === undefined) !== (b.delayMs === undefined), { message: 'give exactly one of runAt or delayMs', path: ['runAt'] }),
  );
  const inv = await invocationOf(c);
  const runAt = body.runAt ? new Date(body.runAt) : new Date(Date.now() + body.delayMs!);
  const job = await rescheduleJob(inv.sql, c.req.param('id'), runAt);
  c.set('kick', runAt.getTime() <= Date.now());
  return c.json({ job: jobJson(job) });
});

jobs.post('/v1/jobs/:id/priority', requireScope('admin'), action, async (c) => {
  const body = await readJson(c, z.strictObject({ priority: z.number().int().min(0).max(1000) }));
  const inv = await invocationOf(c);
  return c.json({ job: jobJson(await setJobPriority(inv.sql, c.req.param('id'), body.priority)) });
});

jobs.post('/v1/jobs/:id/release', requireScope('admin'), action, async (c) => {
  await readJson(c, z.strictObject({}), { emptyAsObject: true });
  const inv = await invocationOf(c);
  const job = await releaseJobLease(inv.sql, c.req.param('id'));
  c.set('kick', true);
  return c.json({ job: jobJson(job) });
});
