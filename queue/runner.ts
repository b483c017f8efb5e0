import { deliverPendingAlerts, type Alerts } from './alerts.ts';
import { claimJobs } from './claim.ts';
import type { Sql } from './db.ts';
import { PermanentError } from './errors.ts';
import type { Job, Json } from './job.ts';
import { backoffMs, type JobRegistry, type JobType, type StepContext } from './registry.ts';
import { completeJob, completeJobs, continueJob, failJob, heartbeat, releaseOwnLease, retryJob, settleCancelled } from './settle.ts';

export interface StepLogLine {
  at: string;
  jobId: string;
  type: string;
  step: string;
  outcome: StepOutcome;
  durationMs: number;
  attempt: number;
  error?: string;
}

export type StepOutcome = 'done' | 'continued' | 'retried' | 'failed' | 'cancelled' | 'lost' | 'released';

export interface Runner {
  sql: Sql;
  registry: JobRegistry;
  /** Stored in locked_by: the invocation or process. */
  workerId: string;
  pool?: string | null;
  alerts?: Alerts;
  /** Steps run at once (claimed in one batch). */
  concurrency?: number;
  /** One JSON-able line per step; never includes payloads. */
  log?: (line: StepLogLine) => void;
  /** Pinned clock for tests; the database clock when absent. */
  clock?: () => Date;
}

export interface RunOptions {
  /** Stop claiming after this long; in-flight steps finish. */
  budgetMs?: number;
  /** Stop after this many steps. */
  maxJobs?: number;
  /** Shutdown: stop claiming; in-flight steps get `graceMs`, then are aborted and their leases released. */
  signal?: AbortSignal;
  graceMs?: number;
  /** When nothing is due: wait this long and look again (a long-running worker); absent: return. */
  idleWaitMs?: number;
}

export type RunCounts = Record<StepOutcome, number> & { claimed: number };

const ABORT_GRACE_DEFAULT_MS = 10_000;

/**
 * Claim → run one step per job (with an AbortSignal and a heartbeat) → settle, until the budget
 * or maxJobs is spent, nothing is due, or the signal aborts. The same loop runs in the Worker
 * (one invocation) and in Node (`npm run worker`).
 */
export async function runSteps(runner: Runner, options: RunOptions = {}): Promise<RunCounts> {
  const counts: RunCounts = { claimed: 0, done: 0, continued: 0, retried: 0, failed: 0, cancelled: 0, lost: 0, released: 0 };
  const concurrency = Math.max(1, runner.concurrency ?? 5);
  const deadline = options.budgetMs === undefined ? Infinity : Date.now() + options.budgetMs;
  const maxJobs = options.maxJobs ?? Infinity;
  const shutdown = new AbortController();
  const onAbort = () => setTimeout(() => shutdown.abort(new Error('runner shutting down')), options.graceMs ?? ABORT_GRACE_DEFAULT_MS).unref?.();
  options.signal?.addEventListener('abort', onAbort, { once: true });
  const inflight = new Set<Promise<void>>();
  const completions = new CompletionBatcher(runner.sql, runner.clock);
  let alertsPending = false;

  const stopping = () => options.signal?.aborted === true || Date.now() >= deadline || counts.claimed >= maxJobs;
  try {
    while (!stopping()) {
      const free = Math.min(concurrency - inflight.size, maxJobs - counts.claimed);
      let claimed: Job[] = [];
      if (free > 0) {
        claimed = await claimJobs(runner.sql, { workerId: runner.workerId, pool: runner.pool, limit: free, now: runner.clock?.() });
        counts.claimed += claimed.length;
        for (const job of claimed) {
          const p: Promise<void> = runStep(runner, job, shutdown.signal, completions).then((outcome) => {
            counts[outcome]++;
            if (outcome === 'failed') alertsPending = true;
          }).finally(() => inflight.delete(p));
          inflight.add(p);
        }
      }
      if (claimed.length === free && free > 0) continue;
      if (inflight.size > 0) {
        await Promise.race(inflight);
        // Steps settled together (one completion batch) finish in the same tick: let them all
        // leave `inflight` before refilling, so the next claim is one batch, not a trickle of ones.
        await new Promise((resolve) => setTimeout(resolve, 0));
      } else if (options.idleWaitMs !== undefined) {
        await sleep(options.idleWaitMs, options.signal);
      } else {
        break; // nothing due and nothing running: drained
      }
    }
    await Promise.all(inflight);
  } finally {
    options.signal?.removeEventListener('abort', onAbort);
  }
  if (alertsPending && runner.alerts) await deliverPendingAlerts(runner.sql, runner.alerts);
  return counts;
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}

/**
 * Group commit for plain completions: steps that end `done` (without a SettleEffect) hand their
 * result here, and every completion that arrives before the next flush is written by one
 * completeJobs statement. One flush at a time; completions arriving meanwhile wait for the next,
 * so batches grow with load and a lone job waits only one timer tick.
 */
export class CompletionBatcher {
  private pending: { job: Job; result: Json | undefined; settle: (fenced: boolean) => void; fail: (error: unknown) => void }[] = [];
  private flushing = false;
  private scheduled = false;

  constructor(
    private readonly sql: Sql,
    private readonly clock?: () => Date,
    private readonly maxBatch = 1000,
  ) {}

  /** Resolves true when the fence held (the job is done), false when the lease was lost. */
  complete(job: Job, result: Json | undefined): Promise<boolean> {
    return new Promise((settle, fail) => {
      this.pending.push({ job, result, settle, fail });
      if (!this.flushing && !this.scheduled) {
        this.scheduled = true;
        // One macrotask later: the other steps of the same claim finish in between and join the batch.
        setTimeout(() => void this.flush(), 0);
      }
    });
  }

  private async flush(): Promise<void> {
    this.scheduled = false;
    this.flushing = true;
    try {
      while (this.pending.length > 0) {
        const batch = this.pending.splice(0, this.maxBatch);
        try {
          const settled = await completeJobs(this.sql, batch, { now: this.clock?.() });
          for (const p of batch) p.settle(settled.has(p.job.id));
        } catch (error) {
          for (const p of batch) p.fail(error);
        }
      }
    } finally {
      this.flushing = false;
    }
  }
}

function errorText(error: unknown): string {
  const text = error instanceof Error ? error.message || error.name : String(error);
  return text.slice(0, 2000);
}

/** Run one claimed job's step and settle it. Never throws: a settle failure is logged and the lease left to expire. */
export async function runStep(runner: Runner, job: Job, shutdown: AbortSignal, completions?: CompletionBatcher): Promise<StepOutcome> {
  const started = Date.now();
  const { sql } = runner;
  const now = () => runner.clock?.() ?? new Date();
  const pinned = () => runner.clock?.();
  const definition = runner.registry.get(job.type);
  const controller = new AbortController();
  const abortWith = (reason: unknown) => {
    if (!controller.signal.aborted) controller.abort(reason);
  };
  const onShutdown = () => abortWith(shutdown.reason);
  shutdown.addEventListener('abort', onShutdown, { once: true });

  let leaseLost = false;
  const leaseMs = job.lockedUntil && job.claimedAt ? job.lockedUntil.getTime() - job.claimedAt.getTime() : 120_000;
  const beat = setInterval(() => {
    heartbeat(sql, job, { now: pinned() })
      .then((hb) => {
        if (!hb.owned) {
          leaseLost = true;
          abortWith(new Error('lease lost'));
        }
      })
      .catch(() => {}); // a missed beat is retried next interval; the lease still has 2/3 left
  }, Math.max(250, Math.floor(leaseMs / 3)));

  let outcome: StepOutcome;
  let error: string | undefined;
  const ctx = (def: JobType<unknown>, payload: unknown): StepContext<unknown> => ({
    job,
    payload,
    step: job.step,
    checkpoint: job.checkpoint,
    attempt: job.attempts,
    signal: controller.signal,
    sql,
    now,
  });
  try {
    if (!definition) {
      error = `unknown job type "${job.type}": no handler is registered in this deployment`;
      outcome = (await failJob(sql, job, error, { now: pinned() })) ? 'failed' : 'lost';
    } else {
      const parsed = definition.payload.safeParse(job.payload);
      if (!parsed.success) {
        error = `invalid payload: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`;
        outcome = (await failJob(sql, job, error, { now: pinned() })) ? 'failed' : 'lost';
      } else {
        outcome = await execute(runner, definition, ctx(definition, parsed.data), job, () => leaseLost, (e) => (error = e), completions);
      }
    }
  } catch (settleError) {
    // The database failed while settling: the lease expires and the job is claimed again.
    error = `settle failed: ${errorText(settleError)}`;
    outcome = 'lost';
  } finally {
    clearInterval(beat);
    shutdown.removeEventListener('abort', onShutdown);
  }
  runner.log?.({
    at: new Date().toISOString(),
    jobId: job.id,
    type: job.type,
    step: job.step,
    outcome,
    durationMs: Date.now() - started,
    attempt: job.attempts,
    ...(error ? { error } : {}),
  });
  return outcome;
}

async function execute(
  runner: Runner,
  definition: JobType<unknown>,
  ctx: StepContext<unknown>,
  job: Job,
  leaseLost: () => boolean,
  setError: (e: string) => void,
  completions?: CompletionBatcher,
): Promise<StepOutcome> {
  const { sql } = runner;
  const pinned = () => runner.clock?.();
  try {
    if (job.cancelRequestedAt) {
      await definition.onCancel?.(ctx);
      return (await settleCancelled(sql, job, { now: pinned() })) ? 'cancelled' : 'lost';
    }
    const result = await definition.run(ctx);
    if (leaseLost()) return 'lost';
    if (result.outcome === 'done') {
      if (!result.effect && completions) return (await completions.complete(job, result.result)) ? 'done' : 'lost';
      return (await completeJob(sql, job, result.result, { now: pinned(), effect: result.effect })) ? 'done' : 'lost';
    }
    return (await continueJob(sql, job, result, { now: pinned(), effect: result.effect })) ? 'continued' : 'lost';
  } catch (thrown) {
    if (leaseLost()) return 'lost';
    const message = errorText(thrown);
    setError(message);
    if (ctx.signal.aborted && !(thrown instanceof PermanentError)) {
      // Shutdown cut the step short: hand the job back for immediate reclaim, attempt unspent.
      return (await releaseOwnLease(sql, job, 'runner shut down mid-step', { now: pinned() })) ? 'released' : 'lost';
    }
    let outcome: 'queued' | 'failed' | 'lost';
    if (thrown instanceof PermanentError) {
      outcome = (await failJob(sql, job, message, { now: pinned() })) ? 'failed' : 'lost';
    } else {
      outcome = await retryJob(sql, job, message, backoffMs(definition.retry, job.attempts), { now: pinned() });
    }
    if (outcome === 'failed' && definition.onFailed) {
      // Compensation is best effort: the job is already failed, and the cleanup sweep is the second net.
      await definition.onFailed(ctx, message).catch(() => {});
    }
    return outcome === 'queued' ? 'retried' : outcome;
  }
}
