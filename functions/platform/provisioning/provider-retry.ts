import { z } from 'zod';
import { PermanentError, RateLimitedError } from '../../../queue/errors.ts';
import { parseCheckpoint } from '../checkpoint.ts';
import type { JsonObject } from '../../../queue/job.ts';
import { backoffMs, next, type RetryPolicy, type StepContext, type StepResult } from '../../../queue/registry.ts';
import { CloudProviderError, CloudRateLimitError } from './ports/cloud-provider.ts';

/**
 * Provider errors become delayed steps, never sleeps inside an invocation.
 *
 * A 429 is the provider's limit for the whole token, not this job's trouble: it is thrown as the
 * engine's RateLimitedError with the wait the provider named (Retry-After, else ratelimit-reset),
 * so the job type's rate key (`provider:digitalocean`) is paused for every job of it and the
 * attempt is given back (worker.settle_rate_limited). It does not count as a provider retry.
 *
 * Another retryable provider error (5xx, network) ends the step with `next(sameStep, {delayMs})`:
 * the delay is what the provider asked for (Retry-After) or an exponential backoff. The count of
 * such retries of the current step lives in the checkpoint (`providerRetry`), since a continued
 * step resets the engine's attempts; past `maxRetries` the error is thrown and the type's own
 * retry policy (and in the end, failure and compensation) takes over. A non-retryable provider
 * error (a 4xx other than 408/429) fails the job at once: repeating the request cannot help.
 *
 * Why not throw and let the engine retry? The runner computes a thrown error's delay from the
 * type's retry policy and cannot honour "retry after exactly N ms" (see the issue 5 report).
 */

export interface ProviderRetryOptions {
  maxRetries?: number;
  /** Backoff when the provider gave no Retry-After. */
  backoff?: RetryPolicy;
}

/** The retries of one step so far (null once a step got through). */
const retryCheckpoint = z.looseObject({ providerRetry: z.looseObject({ step: z.string(), count: z.number().int().min(0) }).nullish() });

export const DEFAULT_PROVIDER_RETRIES = 8;
const DEFAULT_BACKOFF: RetryPolicy = { baseMs: 2_000, maxMs: 5 * 60_000 };

function retriesSoFar(type: string, checkpoint: JsonObject, step: string): number {
  const state = parseCheckpoint(type, retryCheckpoint, checkpoint).providerRetry;
  return state && state.step === step ? state.count : 0;
}

export async function withProviderRetry<P>(ctx: StepContext<P>, body: () => Promise<StepResult>, options: ProviderRetryOptions = {}): Promise<StepResult> {
  const count = retriesSoFar(ctx.job.type, ctx.checkpoint, ctx.step);
  let result: StepResult;
  try {
    result = await body();
  } catch (error) {
    if (!(error instanceof CloudProviderError)) throw error;
    if (error instanceof CloudRateLimitError) throw new RateLimitedError(error.message, error.retryAfterMs);
    if (!error.retryable) throw new PermanentError(error.message);
    if (count >= (options.maxRetries ?? DEFAULT_PROVIDER_RETRIES)) throw error;
    const delayMs = error.retryAfterMs ?? backoffMs(options.backoff ?? DEFAULT_BACKOFF, count + 1);
    return next(ctx.step, { checkpoint: { providerRetry: { step: ctx.step, count: count + 1, status: error.status, error: error.message } }, delayMs });
  }
  // A step that got through clears the count, so a later step (or the next poll) starts fresh.
  if (ctx.checkpoint.providerRetry && result.outcome === 'continue') return { ...result, checkpoint: { ...result.checkpoint, providerRetry: null } };
  return result;
}
