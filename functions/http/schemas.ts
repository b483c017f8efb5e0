import { z } from '@hono/zod-openapi';
import { DEADLINE_SEVERITIES, JOB_STATUSES } from '../../queue/index.ts';

/**
 * The answers' shapes, for the OpenAPI document (and the typed client generated from it).
 * serialize.ts's return types are checked against these at compile time.
 */
export const errorSchema = z
  .object({ error: z.object({ code: z.string(), message: z.string(), field: z.string().optional() }) })
  .openapi('Error');

const json = z.unknown().openapi({ description: 'any JSON value' });
const time = z.string().openapi({ format: 'date-time' });

export const jobSchema = z
  .object({
    id: z.string(),
    type: z.string(),
    status: z.enum(JOB_STATUSES),
    payload: z.record(z.string(), json),
    priority: z.number().int(),
    runAt: time.nullable().openapi({ description: 'null while the job is parked (waiting for a child or an operator)' }),
    attempts: z.number().int().openapi({
      description: 'failures of the current step so far: 0 while its first try runs, +1 for each try that failed (a thrown error, a lost lease), back to 0 when the job moves on to its next step',
    }),
    maxAttempts: z.number().int().openapi({ description: 'tries a step gets: the job fails when a step has failed this many times' }),
    lockedUntil: time.nullable(),
    lockedBy: z.string().nullable(),
    dedupeKey: z.string().nullable(),
    submitKey: z.string().nullable(),
    step: z.string(),
    checkpoint: z.record(z.string(), json),
    lastError: z.string().nullable(),
    result: json.nullable(),
    pool: z.string().nullable(),
    weight: z.string(),
    concurrencyKey: z.string().nullable(),
    cancelRequested: z.boolean(),
    supersededBy: z.string().nullable(),
    createdAt: time,
    startedAt: time.nullable(),
    finishedAt: time.nullable(),
    deadlineAt: time.nullable().openapi({ description: 'when the job should be done by (enqueue + its deadline, its own or its type\'s); null without one' }),
    deadlineSeverity: z.enum(DEADLINE_SEVERITIES).nullable(),
    inProgress: z.boolean().openapi({ description: 'started and not finished: running, or queued between steps (or for a retry of the current step)' }),
    currentStep: z.string().nullable().openapi({ description: 'the step the job is on while in progress; null otherwise' }),
    nextStepAt: time.nullable().openapi({ description: 'when the next step (or the retry) is due while the job waits between steps; null while running, parked, or not in progress' }),
  })
  .openapi('Job');

export const eventSchema = z
  .object({ id: z.number().int(), at: time, kind: z.string(), detail: z.record(z.string(), json) })
  .openapi('JobEvent');

export const jobAnswer = z.object({ job: jobSchema, duplicate: z.literal(true).optional() }).openapi('JobAnswer');
