// The rate-limited outcome (0210): a step whose provider refused it for its rate limit pauses the
// job's rate key and is tried again when the provider said, its attempt unspent.
import { settleRateLimitedRow } from '../driver/flow-control.ts';
import type { StepRun } from './step-run.ts';

/** The longest a provider's Retry-After may pause a key (worker.settle_rate_limited's bound). */
const MAX_PAUSE_MS = 86_400_000;

/**
 * Settle a step that threw a rate-limit error. 'released' when the job had a rate key (the key
 * is paused and the job queued for then); null when it has none, for the caller to retry it as
 * any error; 'lost' when the lease was gone.
 */
export async function settleRateLimited(run: StepRun, retryAfterMs: number, message: string): Promise<'released' | 'lost' | null> {
  const wait = Math.min(retryAfterMs, MAX_PAUSE_MS);
  const outcome = await run.settle(() => settleRateLimitedRow(run.runner.sql, run.job, wait, message, run.pinned()));
  if (outcome === 'no_key') return null;
  return outcome === 'paused' ? 'released' : 'lost';
}
