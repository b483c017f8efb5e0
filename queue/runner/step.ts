// The step: run one claimed job's handler and map what it returned or threw to one settle
// (done, continued, retried, failed, cancelled, released, or lost when nothing could be written).
import { isRateLimited, PermanentError } from '../errors.ts';
import type { Job } from '../job.ts';
import { backoffMs, type JobType, type StepContext } from '../registry.ts';
import { spawnChildren } from '../children.ts';
import { completeJob, continueJob, failJob, releaseOwnLease, retryJob, settleCancelled } from '../settle.ts';
import { endTimedOutWait, settleWait } from '../signals.ts';
import type { CompletionBatcher } from './completer.ts';
import { settleRateLimited } from './rate-limited.ts';
import { SettleFailed } from './settle-retry.ts';
import { Context, StepRun } from './step-run.ts';
import type { Runner, StepOutcome } from './types.ts';

/** The longest a thrown error's retryAfterMs may push a retry out. */
const MAX_RETRY_AFTER_MS = 24 * 3_600_000;

function errorText(error: unknown): string {
  const text = error instanceof Error ? error.message || error.name : String(error);
  return text.slice(0, 2000);
}

/**
 * Run one claimed job's step and settle it. Never throws. A settle that fails on a database blip
 * is written again within the lease (see StepRun.mayRetry); only when that runs out is the step
 * logged `lost` and its lease left to expire.
 */
export async function runStep(
  runner: Runner,
  job: Job,
  shutdown: AbortSignal,
  completions?: CompletionBatcher,
  claimSentAt: number = Date.now(),
): Promise<StepOutcome> {
  const started = Date.now();
  const { sql } = runner;
  const definition = runner.registry.get(job.type);
  const run = new StepRun(runner, job, shutdown, claimSentAt);
  let outcome: StepOutcome;
  try {
    if (!definition) {
      // The claim asks only for the registry's types, so this is a job claimed for a type the
      // registry no longer has: hand it back, attempt unspent, for a runner that has a handler.
      run.error = `no handler for job type "${job.type}" in this runner: released for a runner that has one`;
      outcome = (await run.settle(() => releaseOwnLease(sql, job, run.error!, { now: run.pinned() }))) ? 'released' : 'lost';
    } else {
      const parsed = definition.payload.safeParse(job.payload);
      if (!parsed.success) {
        run.error = `invalid payload: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`;
        outcome = (await run.settle(() => failJob(sql, job, run.error!, { now: run.pinned() }))) ? 'failed' : 'lost';
      } else {
        outcome = await execute(run, definition, new Context(run, parsed.data), completions);
      }
    }
  } catch (settleError) {
    // The database failed while settling, longer than the lease allowed retrying (or the client
    // was ended): the lease expires and the job is claimed again.
    run.error = `settle failed: ${errorText(settleError)}`;
    outcome = 'lost';
  } finally {
    run.end();
  }
  runner.log?.({
    at: new Date().toISOString(),
    jobId: job.id,
    type: job.type,
    step: job.step,
    outcome,
    durationMs: Date.now() - started,
    attempt: job.attempts,
    ...(run.error ? { error: run.error } : {}),
    ...(run.settleRetries > 0 ? { settleRetries: run.settleRetries } : {}),
  });
  return outcome;
}

async function execute(run: StepRun, definition: JobType<unknown>, ctx: Context, completions?: CompletionBatcher): Promise<StepOutcome> {
  const { job } = run;
  const { sql } = run.runner;
  try {
    if (job.cancelRequestedAt) {
      await definition.onCancel?.(ctx);
      return (await run.settle(() => settleCancelled(sql, job, { now: run.pinned() }))) ? 'cancelled' : 'lost';
    }
    if (ctx.waitUnresolved) {
      const ended = await run.settle(() => endTimedOutWait(sql, job, { now: run.pinned() }));
      if (!ended) return 'lost';
      ctx.event = ended;
    }
    const result = await definition.run(ctx);
    if (run.leaseLost) return 'lost';
    if (result.outcome === 'wait') {
      return (await run.settle(() => settleWait(sql, job, result, { now: run.pinned(), effect: result.effect }))) ? 'continued' : 'lost';
    }
    if (result.outcome === 'done') {
      if (!result.effect && completions) {
        // Group commit; if that statement fails (a blip, or the claim it rode with), this
        // completion is written again on its own.
        const held = await completions.complete(job, result.result).catch(() =>
          run.settle(() => completeJob(sql, job, result.result, { now: run.pinned() })),
        );
        return held ? 'done' : 'lost';
      }
      return (await run.settle(() => completeJob(sql, job, result.result, { now: run.pinned(), effect: result.effect }))) ? 'done' : 'lost';
    }
    if (result.outcome === 'spawn') return (await run.settle(() => spawnChildren(sql, job, result, { now: run.pinned() }))) ? 'continued' : 'lost';
    return (await run.settle(() => continueJob(sql, job, result, { now: run.pinned(), effect: result.effect }))) ? 'continued' : 'lost';
  } catch (thrown) {
    // A settle that the database kept refusing is not the step's failure: nothing can be written.
    if (thrown instanceof SettleFailed) throw thrown;
    if (run.leaseLost) return 'lost';
    const message = errorText(thrown);
    run.error = message;
    if (ctx.signal.aborted && !(thrown instanceof PermanentError)) {
      // Shutdown cut the step short: hand the job back for immediate reclaim, attempt unspent.
      return (await run.settle(() => releaseOwnLease(sql, job, 'runner shut down mid-step', { now: run.pinned() }))) ? 'released' : 'lost';
    }
    let outcome: 'queued' | 'failed' | 'lost';
    if (thrown instanceof PermanentError) {
      outcome = (await run.settle(() => failJob(sql, job, message, { now: run.pinned() }))) ? 'failed' : 'lost';
    } else {
      // A provider's rate limit on a job with a rate key pauses the key (queue/runner/rate-limited.ts).
      const limited = isRateLimited(thrown) ? await settleRateLimited(run, thrown.retryAfterMs, message) : null;
      if (limited) return limited;
      // An error may say when to try again (a provider's 429 Retry-After); else the type's backoff.
      const hinted = (thrown as { retryAfterMs?: unknown } | null)?.retryAfterMs;
      const delayMs = typeof hinted === 'number' && hinted >= 0 ? Math.min(hinted, MAX_RETRY_AFTER_MS) : backoffMs(definition.retry, job.attempts);
      // A failing cancel hook backs off like any step; a failing step with a cancel pending is due
      // at once, so the hook runs next.
      outcome = await run.settle(() => retryJob(sql, job, message, delayMs, { now: run.pinned(), cancelDueNow: !job.cancelRequestedAt }));
    }
    if (outcome === 'failed' && definition.onFailed) {
      // Compensation is best effort: the job is already failed, and the cleanup sweep is the second net.
      await definition.onFailed(ctx, message).catch(() => {});
    }
    return outcome === 'queued' ? 'retried' : outcome;
  }
}
