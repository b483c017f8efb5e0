import { jobProgress, PARKED_MS, type Job, type JobEvent } from '../../queue/index.ts';
import type { z } from '@hono/zod-openapi';
import { redactSecrets } from '../lib/redact.ts';
import type { eventSchema, jobSchema } from './schemas.ts';

/**
 * A job as the API shows it: camelCase, secrets redacted, the lease token withheld, and its
 * progress (queue/progress.ts): `attempts` is the failures of the current step.
 */
export function jobJson(job: Job): z.infer<typeof jobSchema> {
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
    checkpoint: redactSecrets(job.checkpoint),
    lastError: job.lastError,
    result: redactSecrets(job.result),
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

export function eventJson(event: JobEvent): z.infer<typeof eventSchema> {
  const { token: _token, ...detail } = event.detail as Record<string, unknown>;
  return { id: event.id, at: event.at.toISOString(), kind: event.kind, detail: redactSecrets(detail) };
}
