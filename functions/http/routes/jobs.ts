import { createRoute, z } from '@hono/zod-openapi';
import type { Context } from 'hono';
import {
  cancelJob, DEADLINE_SEVERITIES, decodeCursor, enqueue, enqueueBatch, MAX_DEADLINE_MS, failJobPermanently, getJob, JOB_STATUSES, jobFamily, jobWait, listJobs, NotFoundError,
  releaseJobLease, requeueJob, rescheduleJob, setJobPriority, typeAccess, typeFlowKeys, type EnqueueInput, type JsonObject, type Queryable,
} from '../../../queue/index.ts';
import type { WorkerEnv } from '../../config.ts';
import { requireScope, scopesOf } from '../auth.ts';
import { limitBody, readJson, storableText } from '../body.ts';
import { invocationOf, type AppEnv } from '../context.ts';
import { HttpError } from '../errors.ts';
import { AUTH_ERRORS, bearer, createRouter, errorAnswers, idParam, jsonAnswer, jsonBody, mount } from '../openapi.ts';
import { childrenSchema, familyJson, LISTED_CHILDREN } from '../children-json.ts';
import { eventJson, jobJson } from '../serialize.ts';
import { waitJson, waitSchema } from '../wait-json.ts';
import { eventSchema, jobAnswer, jobSchema } from '../schemas.ts';

const key = z.string().min(1).max(200);
/** An ISO time Postgres can store: ISO allows year 0000, timestamptz starts at year 1 (4713 BC aside). */
const runAtField = z.iso
  .datetime({ offset: true })
  .refine((s) => new Date(s).getUTCFullYear() >= 1, 'runAt must be in year 1 or later');
/** An enqueue's own rate limit; the window's form and range are the engine's to check (rateLimit.per). */
const rateLimitField = z
  .strictObject({
    key: z.string().min(1).max(200).openapi({ description: 'literal text, e.g. provider:stripe' }),
    limit: z.number().int().min(1).max(100_000),
    per: z.union([z.string().max(20), z.number().int()]).openapi({ description: "the window: '30s', '1m', '1h', '1d', or milliseconds (1 s to 7 days)" }),
  })
  .openapi({
    description: "at most `limit` steps of the key's jobs start in any window of `per`; overrides the type's rate limit (admin only then). " +
      'A key has one limit: naming an existing key with another is a 409; a key a job type declares takes the admin token',
  });
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
    deadlineMs: z.number().int().min(1).max(MAX_DEADLINE_MS).optional().openapi({
      description: "done within this long of enqueue, or the leader's tick opens a deadline_missed alert; overrides the type's deadline",
    }),
    deadlineSeverity: z.enum(DEADLINE_SEVERITIES).optional().openapi({
      description: "the alert's severity ('critical' is the manual's P1); default the type's, else 'warning'; needs a deadline, the job's or its type's",
    }),
    rateLimit: rateLimitField.optional(),
    fairnessKey: key.optional().openapi({
      description: "claims take due jobs round-robin across fairness keys (e.g. tenant:42); overrides the type's fairness key (admin only then)",
    }),
  })
  .refine((b) => !(b.runAt && b.delayMs !== undefined), { message: 'give runAt or delayMs, not both', path: ['delayMs'] });

export type EnqueueBody = z.infer<typeof enqueueSchema>;

export function toEnqueueInput(body: EnqueueBody): EnqueueInput {
  const { runAt, payload, ...rest } = body;
  return { ...rest, payload: (payload ?? {}) as JsonObject, ...(runAt ? { runAt: new Date(runAt) } : {}) };
}

const SINGLE_MAX = 256 * 1024;
const BATCH_MAX = 4 * 1024 * 1024;

export const jobs = createRouter();

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

/**
 * A job type's rate key guards a provider's budget (provision_db's DigitalOcean calls), and its
 * fairness key the share each account gets: without the admin scope, an enqueue may neither move
 * a job of such a type to a key of its own nor put its job on a rate key a type declares, where it
 * would spend that type's starts. Checked before anything is written. `fieldOf(i, f)` names the
 * i-th job's field f.
 */
async function refuseForeignFlowKeys(c: Context<AppEnv>, sql: Queryable, inputs: EnqueueBody[], fieldOf: (i: number, field: string) => string): Promise<void> {
  if (!inputs.some((b) => b.rateLimit !== undefined || b.fairnessKey !== undefined)) return;
  const declared = await typeFlowKeys(sql);
  const owners = (key: string) => [...declared].filter(([, k]) => k.rateKey === key).map(([t]) => t);
  const refusal = (b: EnqueueBody): [string, string] | null => {
    const own = declared.get(b.type);
    if (b.rateLimit !== undefined && own?.rateKey) return ['rateLimit', `job type ${b.type} has its own rate limit (key ${own.rateKey}): leave rateLimit out (the admin token may override it)`];
    if (b.rateLimit !== undefined && owners(b.rateLimit.key).length > 0) {
      return ['rateLimit', `rate key ${b.rateLimit.key} belongs to job type(s) ${owners(b.rateLimit.key).join(', ')}: choose another key (the admin token may use it)`];
    }
    if (b.fairnessKey !== undefined && own?.fairKey) return ['fairnessKey', `job type ${b.type} has its own fairness key (${own.fairKey}): leave fairnessKey out (the admin token may override it)`];
    return null;
  };
  const refused = inputs.findIndex((b) => refusal(b) !== null);
  if (refused < 0) return;
  const scopes = await scopesOf(c.env as WorkerEnv, c.req.header('authorization'));
  if (scopes?.includes('admin')) return;
  const [field, message] = refusal(inputs[refused]!)!;
  throw new HttpError(403, 'forbidden', message, fieldOf(refused, field));
}

const batchSchema = z.strictObject({ jobs: z.array(enqueueSchema).min(1).max(1000) });

mount(jobs, createRoute({
  method: 'post', path: '/v1/jobs/batch', tags: ['jobs'], security: bearer,
  summary: 'Enqueue up to 1000 jobs in one transaction (all or none)',
  middleware: [requireScope('enqueue'), limitBody(BATCH_MAX)],
  request: { body: jsonBody(batchSchema) },
  responses: { 201: jsonAnswer(z.object({ jobs: z.array(jobSchema) }), 'the jobs, in the order given'), ...errorAnswers(400, 409, 413, ...AUTH_ERRORS) },
}), async (c) => {
  const body = await readJson(c, batchSchema);
  const inv = await invocationOf(c);
  await refuseInternalTypes(c, inv.sql, body.jobs.map((j) => j.type), (i) => `jobs[${i}].type`);
  await refuseForeignFlowKeys(c, inv.sql, body.jobs, (i, field) => `jobs[${i}].${field}`);
  const results = await enqueueBatch(inv.sql, body.jobs.map(toEnqueueInput));
  c.set('kick', true);
  return c.json({ jobs: results.map((r) => jobJson(r.job, inv.scrub)) }, 201);
});

mount(jobs, createRoute({
  method: 'post', path: '/v1/jobs', tags: ['jobs'], security: bearer,
  summary: 'Enqueue a job',
  middleware: [requireScope('enqueue'), limitBody(SINGLE_MAX)],
  request: { body: jsonBody(enqueueSchema) },
  responses: {
    201: jsonAnswer(jobAnswer, 'enqueued'),
    200: jsonAnswer(jobAnswer, 'a job with this submitKey exists: it is returned, `duplicate: true`'),
    ...errorAnswers(400, 409, 413, ...AUTH_ERRORS),
  },
}), async (c) => {
  const body = await readJson(c, enqueueSchema);
  const inv = await invocationOf(c);
  await refuseInternalTypes(c, inv.sql, [body.type], () => 'type');
  await refuseForeignFlowKeys(c, inv.sql, [body], (_i, field) => field);
  const result = await enqueue(inv.sql, toEnqueueInput(body));
  if (result.duplicate) return c.json({ job: jobJson(result.job, inv.scrub), duplicate: true }, 200);
  c.set('kick', true);
  return c.json({ job: jobJson(result.job, inv.scrub) }, 201);
});

const listQuery = z.strictObject({
  status: z.enum(JOB_STATUSES).optional(),
  type: z.string().min(1).max(63).refine(storableText, 'contains a NUL character or an unpaired UTF-16 surrogate').optional(),
  inProgress: z.enum(['true', 'false']).optional().openapi({ description: 'only jobs in progress (true: running, or queued between steps) or only those not (false)' }),
  limit: z.coerce.number().int().min(1).max(500).optional(),
  cursor: z.string().max(200).optional(),
});

mount(jobs, createRoute({
  method: 'get', path: '/v1/jobs', tags: ['jobs'], security: bearer,
  summary: 'List jobs, newest first, a page at a time',
  middleware: [requireScope('enqueue', 'admin')],
  request: { query: listQuery },
  responses: {
    200: jsonAnswer(z.object({ jobs: z.array(jobSchema), nextCursor: z.string().nullable() }), 'a page; pass nextCursor as cursor for the next'),
    ...errorAnswers(400, ...AUTH_ERRORS),
  },
}), async (c) => {
  const query = listQuery.parse(c.req.query());
  if (query.cursor !== undefined && !decodeCursor(query.cursor)) {
    throw new HttpError(400, 'invalid_input', 'cursor is not a cursor this API returned', 'cursor');
  }
  const inv = await invocationOf(c);
  const { inProgress, ...rest } = query;
  const page = await listJobs(inv.sql, { ...rest, ...(inProgress ? { inProgress: inProgress === 'true' } : {}) });
  return c.json({ jobs: page.jobs.map((j) => jobJson(j, inv.scrub)), nextCursor: page.nextCursor });
});

mount(jobs, createRoute({
  method: 'get', path: '/v1/jobs/{id}', tags: ['jobs'], security: bearer,
  summary: 'A job, its events, its parent and its children',
  middleware: [requireScope('enqueue', 'admin')],
  request: { params: idParam },
  responses: {
    200: jsonAnswer(z.object({
      job: jobSchema, events: z.array(eventSchema),
      parentId: z.string().nullable().openapi({ description: 'the job that spawned (or first adopted) this one as a child' }),
      children: childrenSchema,
      wait: waitSchema,
    }), 'the job'),
    ...errorAnswers(404, ...AUTH_ERRORS),
  },
}), async (c) => {
  const inv = await invocationOf(c);
  const found = await getJob(inv.sql, c.req.param('id'));
  if (!found) throw new NotFoundError(`no job ${c.req.param('id')}`);
  const [family, wait] = await Promise.all([jobFamily(inv.sql, found.job.id, { limit: LISTED_CHILDREN }), jobWait(inv.sql, found.job.id)]);
  return c.json({ job: jobJson(found.job, inv.scrub), events: found.events.map((e) => eventJson(e, inv.scrub)), ...familyJson(family, inv.scrub), wait: wait && waitJson(wait) });
});

const ACTION_MAX = 16 * 1024;
const action = limitBody(ACTION_MAX);

/** An operator's action on one job (admin scope): POST /v1/jobs/{id}/<name>, answering the job. */
function jobAction(name: string, summary: string, body: z.ZodType, optionalBody: boolean) {
  return createRoute({
    method: 'post', path: `/v1/jobs/{id}/${name}`, tags: ['operator'], security: bearer, summary,
    middleware: [requireScope('admin'), action],
    request: { params: idParam, body: { ...jsonBody(body), required: !optionalBody } },
    responses: { 200: jsonAnswer(z.object({ job: jobSchema }), 'the job after the action'), ...errorAnswers(400, 404, 409, 413, ...AUTH_ERRORS) },
  });
}

const empty = z.strictObject({});
const cancelBody = z.strictObject({ reason: z.string().min(1).max(1000).optional() });
const failBody = z.strictObject({ reason: z.string().trim().min(1).max(1000) });
const rescheduleBody = z.strictObject({ runAt: runAtField.optional(), delayMs: z.number().int().min(0).max(365 * 86_400_000).optional() })
  .refine((b) => (b.runAt === undefined) !== (b.delayMs === undefined), { message: 'give exactly one of runAt or delayMs', path: ['runAt'] });
const priorityBody = z.strictObject({ priority: z.number().int().min(0).max(1000) });

mount(jobs, jobAction('cancel', 'Cancel a job (a started one runs its cancel hook)', cancelBody, true), async (c) => {
  const body = await readJson(c, cancelBody, { emptyAsObject: true });
  const inv = await invocationOf(c);
  const job = await cancelJob(inv.sql, c.req.param('id'), body.reason ?? 'cancelled over the API');
  c.set('kick', job.status !== 'cancelled'); // a started job runs its cancel hook on the next claim
  return c.json({ job: jobJson(job, inv.scrub) });
});

mount(jobs, jobAction('retry', 'Requeue a failed or cancelled job', empty, true), async (c) => {
  await readJson(c, empty, { emptyAsObject: true });
  const inv = await invocationOf(c);
  const job = await requeueJob(inv.sql, c.req.param('id'));
  c.set('kick', true);
  return c.json({ job: jobJson(job, inv.scrub) });
});

mount(jobs, jobAction('fail', 'Fail a job permanently', failBody, false), async (c) => {
  const body = await readJson(c, failBody);
  const inv = await invocationOf(c);
  return c.json({ job: jobJson(await failJobPermanently(inv.sql, c.req.param('id'), body.reason), inv.scrub) });
});

mount(jobs, jobAction('reschedule', 'Move a queued job\'s run time (runAt or delayMs)', rescheduleBody, false), async (c) => {
  const body = await readJson(c, rescheduleBody);
  const inv = await invocationOf(c);
  const runAt = body.runAt ? new Date(body.runAt) : new Date(Date.now() + body.delayMs!);
  const job = await rescheduleJob(inv.sql, c.req.param('id'), runAt);
  c.set('kick', runAt.getTime() <= Date.now());
  return c.json({ job: jobJson(job, inv.scrub) });
});

mount(jobs, jobAction('priority', 'Set a queued job\'s priority', priorityBody, false), async (c) => {
  const body = await readJson(c, priorityBody);
  const inv = await invocationOf(c);
  return c.json({ job: jobJson(await setJobPriority(inv.sql, c.req.param('id'), body.priority), inv.scrub) });
});

mount(jobs, jobAction('release', 'Release a running job\'s lease (it is claimed again)', empty, true), async (c) => {
  await readJson(c, empty, { emptyAsObject: true });
  const inv = await invocationOf(c);
  const job = await releaseJobLease(inv.sql, c.req.param('id'));
  c.set('kick', true);
  return c.json({ job: jobJson(job, inv.scrub) });
});
