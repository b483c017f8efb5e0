import { PermanentError } from '../../../queue/errors.ts';
import { defineJobType, type JobType, type StepContext, type StepResult } from '../../../queue/registry.ts';
import type { z } from 'zod';
import { withProviderRetry } from './provider-retry.ts';
import { PROVISION_CONCURRENCY, provisioningConcurrencyKey } from './resources.ts';

/**
 * Every provisioning job of an account shares one key, derived from the payload by enqueue itself
 * (in SQL): a caller cannot pick another key or limit to get past the per-account limit.
 */
export const provisioningConcurrency = { key: provisioningConcurrencyKey('{accountId}'), limit: PROVISION_CONCURRENCY };

/**
 * Every job type that calls DigitalOcean shares this rate key, so one 429 pauses them all until
 * DigitalOcean's reset. DigitalOcean allows 5,000 requests an hour and 250 a minute per token;
 * the engine counts step starts, not requests, and a step makes 1 or 2 requests as a rule (a
 * poll: 1; a create: a list by tag, then the create; a delete: a list, then one per resource),
 * up to 1 + nodes for a cluster's create. 40 starts a minute is at most 2,400 starts an hour:
 * at 2 requests each, 4,800 requests an hour (under 5,000) and 80 a minute (under 250), leaving
 * the per-minute headroom for the occasional large step. Past it, DigitalOcean's 429 pauses the key.
 */
export const DIGITALOCEAN_RATE_LIMIT = { key: 'provider:digitalocean', limit: 40, per: '1m' } as const;

/**
 * The operations manual's SLA for infra jobs, "4h with no PR → P1 alert": a database or a cluster
 * not provisioned within 4 h of its request opens a critical deadline_missed alert.
 */
export const INFRA_DEADLINE = { deadlineMs: 4 * 3_600_000, deadlineSeverity: 'critical' } as const;

export interface ProvisioningJobDefinition<P, D> {
  type: string;
  /** The type's own route (provisioning types are internal). */
  enqueueVia: string;
  payload: z.ZodType<P>;
  /** What every step is given besides its context: the type's adapters and settings. */
  deps: D;
  /** Step name → handler; `start` is the first step of a new job. */
  steps: Record<string, (deps: D, ctx: StepContext<P>) => Promise<StepResult>>;
  /** Destroy what the job created: runs on cancel and after a terminal failure. */
  compensate(deps: D, ctx: StepContext<P>): Promise<void>;
}

/**
 * The shape both provisioning jobs share: DigitalOcean's rate key, provider errors become delayed
 * steps or pause the key (withProviderRetry),
 * a longer lease (provider calls are slow), and compensation on cancel and on failure.
 */
export function defineProvisioningJobType<P, D>(definition: ProvisioningJobDefinition<P, D>): JobType<P> {
  const { deps } = definition;
  return defineJobType<P>({
    type: definition.type,
    enqueueVia: definition.enqueueVia,
    concurrency: provisioningConcurrency,
    rateLimit: DIGITALOCEAN_RATE_LIMIT,
    ...INFRA_DEADLINE,
    payload: definition.payload,
    leaseMs: 300_000,
    maxAttempts: 5,
    retry: { baseMs: 5_000, maxMs: 5 * 60_000 },
    run(ctx) {
      const step = definition.steps[ctx.step];
      if (!step) throw new PermanentError(`${definition.type} has no step ${ctx.step}`);
      return withProviderRetry(ctx, () => step(deps, ctx));
    },
    onCancel: (ctx) => definition.compensate(deps, ctx),
    onFailed: (ctx) => definition.compensate(deps, ctx),
  });
}
