import { createRoute, z } from '@hono/zod-openapi';
import { bulkCancel, bulkRequeue, deadLetters, JOB_STATUSES, type JsonObject, replayJob } from '../../../queue/index.ts';
import { requireScope } from '../auth.ts';
import { limitBody, readJson } from '../body.ts';
import { invocationOf } from '../context.ts';
import { AUTH_ERRORS, bearer, createRouter, errorAnswers, idParam, jsonAnswer, jsonBody, mount } from '../openapi.ts';
import { jobSchema } from '../schemas.ts';
import { jobJson, producedJson } from '../serialize.ts';

/**
 * Operations in bulk (admin scope): retry or cancel by filter, with a dry-run count first; the
 * dead-letter groups; replay of an ended job. Each calls the engine's SQL function
 * (worker.bulk_requeue, bulk_cancel, dead_letters, replay_job). A request walks at most
 * `maxJobs` jobs (default 5000) in batches and answers `nextCursor` to go on from: a request has
 * a budget, the set may not fit in it. Mounted before the job routes: /v1/jobs/bulk/retry is
 * not the retry of a job called "bulk".
 */
export const bulk = createRouter();

const time = z.string().openapi({ format: 'date-time' });
const FILTER_MAX = 16 * 1024;

const filterSchema = z.strictObject({
  type: z.string().min(1).max(63).optional(),
  status: z.union([z.enum(JOB_STATUSES), z.array(z.enum(JOB_STATUSES)).min(1).max(6)]).optional()
    .openapi({ description: 'retry: failed, cancelled, oom_killed (default all three); cancel: queued, running (default both)' }),
  createdAfter: z.iso.datetime({ offset: true }).optional().openapi({ description: 'created at or after' }),
  createdBefore: z.iso.datetime({ offset: true }).optional().openapi({ description: 'created before' }),
  finishedAfter: z.iso.datetime({ offset: true }).optional(),
  finishedBefore: z.iso.datetime({ offset: true }).optional(),
  fingerprint: z.string().regex(/^[0-9a-f]{16}$/, 'must be 16 hex digits, as GET /v1/dead-letters shows').optional(),
  all: z.literal(true).optional().openapi({ description: 'no criterion: every job the operation may take (an empty filter is refused without it)' }),
}).openapi('BulkFilter');

const walkFields = {
  filter: filterSchema,
  dryRun: z.boolean().optional().openapi({ description: 'count what the filter takes now and change nothing' }),
  batchSize: z.number().int().min(1).max(10_000).optional().openapi({ description: 'jobs per transaction (default 500)' }),
  maxJobs: z.number().int().min(1).max(100_000).optional().openapi({ description: 'stop after the batch reaching this many (default 5000) and answer nextCursor' }),
  cursor: z.string().uuid().optional().openapi({ description: 'a nextCursor an earlier call answered' }),
};
const retryBody = z.strictObject(walkFields);
const cancelBody = z.strictObject({ ...walkFields, reason: z.string().trim().min(1).max(1000).optional() });

const counts = {
  dryRun: z.boolean(),
  matched: z.number().int().openapi({ description: 'jobs the filter took (a dry run: all it takes now)' }),
  skipped: z.number().int().openapi({ description: 'moved on before their turn (or another job holds their dedupe key): left as they are' }),
  batches: z.number().int(),
  nextCursor: z.string().nullable().openapi({ description: 'pass as cursor to go on; null: the set is done' }),
};
const retryAnswer = z.object({ ...counts, requeued: z.number().int() }).openapi('BulkRetryResult');
const cancelAnswer = z.object({ ...counts, cancelled: z.number().int(), cancelRequested: z.number().int() }).openapi('BulkCancelResult');

function walkOptions(body: z.infer<typeof retryBody>) {
  return {
    dryRun: body.dryRun ?? false, batchSize: body.batchSize, maxJobs: body.maxJobs ?? 5000, cursor: body.cursor ?? null,
  };
}

mount(bulk, createRoute({
  method: 'post', path: '/v1/jobs/bulk/retry', tags: ['operator'], security: bearer,
  summary: 'Requeue every failed, cancelled or oom_killed job a filter takes (dryRun: count them)',
  middleware: [requireScope('admin'), limitBody(FILTER_MAX)],
  request: { body: jsonBody(retryBody) },
  responses: { 200: jsonAnswer(retryAnswer, 'the counts'), ...errorAnswers(400, 413, ...AUTH_ERRORS) },
}), async (c) => {
  const body = await readJson(c, retryBody);
  const inv = await invocationOf(c);
  const result = await bulkRequeue(inv.sql, body.filter, walkOptions(body));
  c.set('kick', result.requeued > 0);
  return c.json(result);
});

mount(bulk, createRoute({
  method: 'post', path: '/v1/jobs/bulk/cancel', tags: ['operator'], security: bearer,
  summary: 'Cancel every queued or running job a filter takes (dryRun: count them)',
  middleware: [requireScope('admin'), limitBody(FILTER_MAX)],
  request: { body: jsonBody(cancelBody) },
  responses: { 200: jsonAnswer(cancelAnswer, 'the counts'), ...errorAnswers(400, 413, ...AUTH_ERRORS) },
}), async (c) => {
  const body = await readJson(c, cancelBody);
  const inv = await invocationOf(c);
  const result = await bulkCancel(inv.sql, body.filter, { ...walkOptions(body), reason: body.reason ?? 'cancelled in bulk over the API' });
  c.set('kick', result.cancelRequested > 0); // a started job runs its cancel hook on the next claim
  return c.json(result);
});

const deadLetterSchema = z.object({
  type: z.string(), fingerprint: z.string(), error: z.string().openapi({ description: 'last_error normalised: what the group shares' }),
  jobs: z.number().int(), failed: z.number().int(), oomKilled: z.number().int(), firstSeen: time, lastSeen: time,
  sampleId: z.string().openapi({ description: "the group's latest job" }), sampleError: z.string().nullable(),
}).openapi('DeadLetterGroup');
const deadLetterQuery = z.strictObject({
  type: z.string().min(1).max(63).optional(),
  limit: z.coerce.number().int().min(1).max(500).optional(),
});

mount(bulk, createRoute({
  method: 'get', path: '/v1/dead-letters', tags: ['operator'], security: bearer,
  summary: 'Failed and oom_killed jobs grouped by type and error fingerprint, the latest group first',
  middleware: [requireScope('admin')],
  request: { query: deadLetterQuery },
  responses: { 200: jsonAnswer(z.object({ groups: z.array(deadLetterSchema) }), 'the groups'), ...errorAnswers(400, ...AUTH_ERRORS) },
}), async (c) => {
  const query = deadLetterQuery.parse(c.req.query());
  const inv = await invocationOf(c);
  const groups = await deadLetters(inv.sql, query);
  return c.json({ groups: groups.map((g) => ({ ...g, error: producedJson(g.error, inv.scrub), sampleError: producedJson(g.sampleError, inv.scrub), firstSeen: g.firstSeen.toISOString(), lastSeen: g.lastSeen.toISOString() })) });
});

const replayBody = z.strictObject({
  fromStep: z.string().min(1).max(200).optional().openapi({ description: "a step the job reached (default 'start', its first)" }),
  payload: z.record(z.string(), z.unknown()).optional().openapi({ description: "an edited payload, checked as an enqueue checks it (default the job's)" }),
});

mount(bulk, createRoute({
  method: 'post', path: '/v1/jobs/{id}/replay', tags: ['operator'], security: bearer,
  summary: 'Run an ended job again as a new job (from a step, with an edited payload), linked to the old one',
  middleware: [requireScope('admin'), limitBody(256 * 1024)],
  request: { params: idParam, body: { ...jsonBody(replayBody), required: false } },
  responses: { 201: jsonAnswer(z.object({ job: jobSchema }), 'the new job'), ...errorAnswers(400, 404, 409, 413, ...AUTH_ERRORS) },
}), async (c) => {
  const body = await readJson(c, replayBody, { emptyAsObject: true });
  const inv = await invocationOf(c);
  const job = await replayJob(inv.sql, c.req.param('id'), { fromStep: body.fromStep, payload: body.payload as JsonObject | undefined });
  c.set('kick', true);
  return c.json({ job: jobJson(job, inv.scrub) }, 201);
});
