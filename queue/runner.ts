import { deliverPendingAlerts, type Alerts } from './alerts.ts';
import { settleAndClaim } from './claim.ts';
import type { Sql } from './db.ts';
import { PermanentError } from './errors.ts';
import type { Job, Json, JsonObject } from './job.ts';
import { backoffMs, type JobRegistry, type JobType, type StepContext } from './registry.ts';
import { SettleFailed, writeSettle, type SettleRetryScope } from './settle-retry.ts';
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
  /** Times the step's settle was written again after a database blip (absent when none). */
  settleRetries?: number;
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
  /**
   * How long one claim round trip may go unanswered before runSteps gives up with an error
   * (default 30 s): postgres.js 3.4.9 can leave a query on a connection reset by a database
   * restart pending forever, which would wedge the runner instead of reporting the outage.
   */
  claimTimeoutMs?: number;
}

export interface RunOptions {
  /** Stop claiming after this long; in-flight steps finish. */
  budgetMs?: number;
  /** Stop after this many steps. */
  maxJobs?: number;
  /** Shutdown: stop claiming; in-flight steps get `graceMs`, then are aborted and their leases released. */
  signal?: AbortSignal;
  graceMs?: number;
  /**
   * When nothing is due: look again later (a long-running worker); absent: return. This is the
   * longest wait: right after work was found the runner looks again within 2 ms, doubling the wait
   * while claims come back empty, so a steady trickle of jobs starts fast and an idle runner polls
   * every idleWaitMs.
   */
  idleWaitMs?: number;
}

export type RunCounts = Record<StepOutcome, number> & { claimed: number };

const ABORT_GRACE_DEFAULT_MS = 10_000;
const CLAIM_TIMEOUT_DEFAULT_MS = 30_000;
/** The first idle wait after a claim that found work; it doubles while claims come back empty. */
const IDLE_FIRST_WAIT_MS = 2;

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
  /** Every claimed step until it is settled (running, or finished and waiting for its settle). */
  const inflight = new Set<Promise<void>>();
  const completions = new CompletionBatcher(runner.sql, runner.clock);
  let alertsPending = false;
  let wakeLoop: (() => void) | null = null;
  const wake = () => {
    const resolve = wakeLoop;
    wakeLoop = null;
    resolve?.();
  };

  let idleDelay = IDLE_FIRST_WAIT_MS;
  /** When the last lease claimed so far ends, as first granted (Date.now() time). */
  let leasesEnd = 0;
  const stopping = () => options.signal?.aborted === true || Date.now() >= deadline || counts.claimed >= maxJobs;
  const running = () => inflight.size - completions.waiting;
  try {
    while (!stopping()) {
      const free = Math.min(concurrency - running(), maxJobs - counts.claimed);
      let claimed: Job[] = [];
      if (free > 0) {
        // Finished steps' completions ride with the claim: one round trip, one commit for both.
        const finished = completions.take();
        completions.detach(); // completions finishing during the claim are flushed on their own
        let result: { settled: Set<string>; jobs: Job[] };
        const claimSentAt = Date.now();
        try {
          // Only the types this runner can run: a job of another type stays queued for a runner
          // that has it (never claimed and failed here).
          const types = runner.registry.list().map((t) => t.type);
          result = await answeredWithin(
            settleAndClaim(runner.sql, finished, { workerId: runner.workerId, pool: runner.pool, limit: free, now: runner.clock?.(), types }),
            runner.claimTimeoutMs ?? CLAIM_TIMEOUT_DEFAULT_MS,
          );
        } catch (error) {
          // The batched completions rolled back with the claim: each step writes its own again.
          completions.fail(finished, error);
          // Stop claiming, but give the steps in flight until the last of their leases ends to
          // finish and settle (retrying on the blip) before reporting: a finished step abandoned
          // by an exiting process would end as a crash. A query the driver left hanging does
          // not hold the report longer; that step ends when the caller ends the client.
          completions.detach();
          await settledOrAt(inflight, leasesEnd);
          throw error;
        }
        completions.settle(finished, result.settled);
        claimed = result.jobs;
        for (const job of claimed) {
          const leaseMs = job.lockedUntil && job.claimedAt ? job.lockedUntil.getTime() - job.claimedAt.getTime() : 0;
          leasesEnd = Math.max(leasesEnd, claimSentAt + leaseMs);
        }
        counts.claimed += claimed.length;
        if (claimed.length > 0) idleDelay = IDLE_FIRST_WAIT_MS;
        for (const job of claimed) {
          const p: Promise<void> = runStep(runner, job, shutdown.signal, completions, claimSentAt)
            .then((outcome) => {
              counts[outcome]++;
              if (outcome === 'failed') alertsPending = true;
            })
            .finally(() => {
              inflight.delete(p);
              wake();
            });
          inflight.add(p);
        }
      }
      if (claimed.length === free && free > 0) continue;
      if (inflight.size > 0) {
        // Wait for a step to finish. Completions queued meanwhile stay for the next claim.
        const woken = new Promise<void>((resolve) => (wakeLoop = resolve));
        completions.attach(wake);
        await woken;
        // Steps of one batch finish in the same tick: let them all queue, so the next claim is
        // one batch, not a trickle of ones.
        await new Promise((resolve) => setTimeout(resolve, 0));
      } else if (options.idleWaitMs !== undefined) {
        // Work came in recently: look again soon, backing off to idleWaitMs while nothing comes.
        await sleep(Math.min(idleDelay, options.idleWaitMs), options.signal);
        idleDelay *= 2;
      } else {
        break; // nothing due and nothing running: drained
      }
    }
    completions.detach();
    await Promise.all(inflight);
  } finally {
    completions.detach();
    options.signal?.removeEventListener('abort', onAbort);
  }
  if (alertsPending && runner.alerts) {
    // An alert that cannot be sent now stays pending (notified_at null) for the next pass; it must
    // not cost this run its counts.
    await deliverPendingAlerts(runner.sql, runner.alerts).catch(() => {});
  }
  return counts;
}

/** The longest a thrown error's retryAfterMs may push a retry out. */
const MAX_RETRY_AFTER_MS = 24 * 3_600_000;

/** The claim's answer, or a CLAIM_TIMEOUT error once `ms` pass without one (the query itself is abandoned). */
function answeredWithin<T>(query: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(Object.assign(new Error(`the database did not answer a claim within ${ms} ms: the connection is unresponsive`), { code: 'CLAIM_TIMEOUT' })),
      ms,
    );
  });
  return Promise.race([query, timeout]).finally(() => clearTimeout(timer));
}

/** Resolves when every promise has settled, or at time `at` (Date.now()), whichever comes first. */
function settledOrAt(promises: Iterable<Promise<unknown>>, at: number): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.max(0, at - Date.now()))));
  return Promise.race([Promise.allSettled(promises).then(() => {}), deadline]).finally(() => clearTimeout(timer));
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

interface QueuedCompletion {
  job: Job;
  result: Json | undefined;
  settle: (fenced: boolean) => void;
  fail: (error: unknown) => void;
}

/**
 * Group commit for plain completions: steps that end `done` (without a SettleEffect) hand their
 * result here instead of settling alone. While the runner's loop waits for finished steps it is
 * attached, and takes the queued completions with its next claim (settleAndClaim). Otherwise
 * (the loop is busy claiming, or has stopped) a timer flushes them: one statement at a time,
 * so completions arriving during a flush form the next, larger batch.
 */
export class CompletionBatcher {
  private queued: QueuedCompletion[] = [];
  /** Completions taken for a statement under way. */
  private writing = 0;
  private flushing = false;
  private timer = false;
  private claimer: (() => void) | null = null;

  constructor(
    private readonly sql: Sql,
    private readonly clock?: () => Date,
    private readonly maxBatch = 1000,
  ) {}

  /** Steps that have finished and wait for their completion to be written. */
  get waiting(): number {
    return this.queued.length + this.writing;
  }

  /** Resolves true when the fence held (the job is done), false when the lease was lost. */
  complete(job: Job, result: Json | undefined): Promise<boolean> {
    return new Promise((settle, fail) => {
      this.queued.push({ job, result, settle, fail });
      if (this.claimer) this.claimer();
      else this.schedule();
    });
  }

  /** The loop will take queued completions with its next claim; until detach, no timer flush. */
  attach(wake: () => void): void {
    this.claimer = wake;
    if (this.queued.length > 0) wake();
  }

  detach(): void {
    this.claimer = null;
    if (this.queued.length > 0) this.schedule();
  }

  /** Take queued completions for a statement; report back with settle() or fail(). */
  take(): QueuedCompletion[] {
    const batch = this.queued.splice(0, this.maxBatch);
    this.writing += batch.length;
    return batch;
  }

  settle(batch: QueuedCompletion[], settled: Set<string>): void {
    this.writing -= batch.length;
    for (const c of batch) c.settle(settled.has(c.job.id));
  }

  fail(batch: QueuedCompletion[], error: unknown): void {
    this.writing -= batch.length;
    for (const c of batch) c.fail(error);
  }

  private schedule(): void {
    if (this.timer || this.flushing) return;
    this.timer = true;
    // One macrotask later: the other steps of the same claim finish in between and join the batch.
    setTimeout(() => {
      this.timer = false;
      void this.flush();
    }, 0);
  }

  private async flush(): Promise<void> {
    if (this.flushing) return;
    this.flushing = true;
    try {
      while (this.queued.length > 0 && !this.claimer) {
        const batch = this.take();
        try {
          this.settle(batch, await completeJobs(this.sql, batch, { now: this.clock?.() }));
        } catch (error) {
          this.fail(batch, error);
        }
      }
    } finally {
      this.flushing = false;
    }
    // Queued while the last statement ran and the loop did not take them: write them too.
    if (this.queued.length > 0 && !this.claimer) this.schedule();
  }
}

function errorText(error: unknown): string {
  const text = error instanceof Error ? error.message || error.name : String(error);
  return text.slice(0, 2000);
}

/**
 * One claimed step while it runs and until it is settled: its lease state, its abort signal and
 * its heartbeat. A class rather than closures, because a runner creates one per job and a batch
 * of thousands of short jobs spends measurable time creating (and, bundled with keepNames,
 * naming) closures. It is also the scope of the step's settle retries (SettleRetryScope): the
 * heartbeat keeps the lease while a settle is written again after a database blip.
 */
class StepRun implements SettleRetryScope {
  leaseLost = false;
  error: string | undefined;
  settleRetries = 0;
  /** Local time (Date.now()) until which the lease is known held: the claim's, then each beat's. */
  heldUntil: number;
  readonly leaseMs: number;
  private controller: AbortController | null = null;
  private aborted = false;
  private abortReason: unknown;
  private readonly beat: ReturnType<typeof setInterval>;

  constructor(
    readonly runner: Runner,
    readonly job: Job,
    private readonly shutdown: AbortSignal,
    claimSentAt: number,
  ) {
    const { lockedUntil, claimedAt } = job;
    this.leaseMs = lockedUntil && claimedAt ? lockedUntil.getTime() - claimedAt.getTime() : 120_000;
    // The lease started no earlier than the claim was sent: counting from then errs on the short side.
    this.heldUntil = claimSentAt + this.leaseMs;
    this.beat = setInterval(beatStep, Math.max(250, Math.floor(this.leaseMs / 3)), this);
  }

  /** Created on first use: most steps never look at it, and then need neither it nor a listener. */
  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.aborted) this.controller.abort(this.abortReason);
      else if (this.shutdown.aborted) this.controller.abort(this.shutdown.reason);
      else this.shutdown.addEventListener('abort', this, { once: true });
    }
    return this.controller.signal;
  }

  /** The shutdown signal's listener (an EventListener object: no closure per step). */
  handleEvent(): void {
    this.abort(this.shutdown.reason);
  }

  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.abortReason = reason;
    this.controller?.abort(reason);
  }

  /**
   * A settle that failed on a database blip is written again while the lease is held at the next
   * try (the heartbeat keeps extending it), and the runner is not stopping past its grace. Past
   * the lease the rescue may have handed the job on: the step is then a crash after all.
   */
  mayRetry(nextTryAt: number): boolean {
    return !this.leaseLost && !this.shutdown.aborted && nextTryAt < this.heldUntil;
  }

  retried(): void {
    this.settleRetries++;
  }

  /** Write a settle, again after a database blip while the lease allows (see mayRetry). */
  settle<T>(write: () => Promise<T>): Promise<T> {
    return writeSettle(this, write);
  }

  /** The runner's pinned clock, or undefined for the database clock. */
  pinned(): Date | undefined {
    return this.runner.clock?.();
  }

  end(): void {
    clearInterval(this.beat);
    if (this.controller) this.shutdown.removeEventListener('abort', this);
  }
}

function beatStep(run: StepRun): void {
  const sent = Date.now();
  heartbeat(run.runner.sql, run.job, { now: run.pinned() })
    .then((hb) => {
      if (!hb.owned) {
        run.leaseLost = true;
        run.abort(new Error('lease lost'));
      } else {
        run.heldUntil = Math.max(run.heldUntil, sent + run.leaseMs);
      }
    })
    .catch(() => {}); // a missed beat is retried next interval; the lease still has 2/3 left
}

/** What a step sees (StepContext), backed by its StepRun. */
class Context implements StepContext<unknown> {
  readonly job: Job;
  readonly step: string;
  readonly checkpoint: JsonObject;
  readonly attempt: number;
  readonly sql: Sql;

  constructor(
    private readonly run: StepRun,
    readonly payload: unknown,
  ) {
    this.job = run.job;
    this.step = run.job.step;
    this.checkpoint = run.job.checkpoint;
    this.attempt = run.job.attempts;
    this.sql = run.runner.sql;
  }

  get signal(): AbortSignal {
    return this.run.signal;
  }

  now(): Date {
    return this.run.runner.clock?.() ?? new Date();
  }
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

async function execute(run: StepRun, definition: JobType<unknown>, ctx: StepContext<unknown>, completions?: CompletionBatcher): Promise<StepOutcome> {
  const { job } = run;
  const { sql } = run.runner;
  try {
    if (job.cancelRequestedAt) {
      await definition.onCancel?.(ctx);
      return (await run.settle(() => settleCancelled(sql, job, { now: run.pinned() }))) ? 'cancelled' : 'lost';
    }
    const result = await definition.run(ctx);
    if (run.leaseLost) return 'lost';
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
