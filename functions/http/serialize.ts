import { jobProgress, PARKED_MS, type Job, type JobEvent } from '../../queue/index.ts';
import type { z } from '@hono/zod-openapi';
import { redactSecrets, scrubJson } from '../lib/redact.ts';
import type { eventSchema, jobSchema } from './schemas.ts';

/** Removes the env's secret values from text (Invocation.scrub). */
export type Scrub = (text: string) => string;

/**
 * What the system produced (an error, a step's checkpoint or result, an event's detail) as an
 * answer shows it: secret-named values redacted and configured secret values scrubbed. The
 * write path scrubs too, but stored text also comes from operator SQL, fail and cancel reasons,
 * and rows written before a secret was configured: every answer (API and dashboard) reads it
 * through here. Never used on what a caller sent (a payload, the request an `enqueued` event
 * keeps, a signal's payload): scrubbing those by value would confirm a guessed secret.
 */
export function producedJson<T>(value: T, scrub: Scrub): T {
  return scrubJson(redactSecrets(value), scrub);
}

/** What a caller sent, inside an event's detail: shown as sent (secret-named keys aside). */
const CALLER_SENT_DETAIL = new Set(['request', 'payload']);

/**
 * A job as the API shows it: camelCase, secrets redacted, the lease token withheld, and its
 * progress (queue/progress.ts): `attempts` is the failures of the current step. The payload is
 * the caller's, redacted by key only; the rest is scrubbed as producedJson says.
 */
export function jobJson(job: Job, scrub: Scrub): z.infer<typeof jobSchema> {
  const progress = jobProgress(job);
  return {
    id: job.id,
    type: job.type,
    status: job.status,
    payload: redactSecrets(job.payload),
    priority: job.priority,
    runAt: job.runAt.getTime() >= PARKED_MS ? null : job.runAt.toISOString(),
    attempts: progress.failures,
    maxAttempts: job.maxAttempts,
    lockedUntil: job.lockedUntil?.toISOString() ?? null,
    lockedBy: job.lockedBy,
    dedupeKey: job.dedupeKey,
    submitKey: job.submitKey,
    step: job.step,
    checkpoint: producedJson(job.checkpoint, scrub),
    lastError: producedJson(job.lastError, scrub),
    result: producedJson(job.result, scrub),
    pool: job.pool,
    weight: job.weight,
    concurrencyKey: job.concurrencyKey,
    cancelRequested: job.cancelRequestedAt !== null,
    supersededBy: job.supersededBy,
    createdAt: job.createdAt.toISOString(),
    startedAt: job.startedAt?.toISOString() ?? null,
    finishedAt: job.finishedAt?.toISOString() ?? null,
    deadlineAt: job.deadlineAt?.toISOString() ?? null,
    deadlineSeverity: job.deadlineSeverity,
    inProgress: progress.inProgress,
    currentStep: progress.currentStep,
    nextStepAt: progress.nextStepAt?.toISOString() ?? null,
  };
}

export function eventJson(event: JobEvent, scrub: Scrub): z.infer<typeof eventSchema> {
  const { token: _token, ...detail } = event.detail as Record<string, unknown>;
  const shown: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(detail)) shown[k] = CALLER_SENT_DETAIL.has(k) ? redactSecrets(v) : producedJson(v, scrub);
  return { id: event.id, at: event.at.toISOString(), kind: event.kind, detail: redactSecrets(shown) };
}
