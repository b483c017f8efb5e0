// The claim loop: claims batches as steps free up, starts each step, waits, and stops on the
// budget, maxJobs, shutdown or an empty queue. What a step does once claimed is step.ts's job.
import { deliverPendingAlerts } from '../alerts.ts';
import { settleAndClaim } from '../claim.ts';
import { backoffDelayMs, DATABASE_RETRY_BACKOFF, isConnectionFailure, isContention } from '../database-errors.ts';
import type { Job } from '../job.ts';
import { CompletionBatcher } from './completer.ts';
import { runStep } from './step.ts';
import type { RunCounts, Runner, RunOptions } from './types.ts';

const ABORT_GRACE_DEFAULT_MS = 10_000;
const CLAIM_TIMEOUT_DEFAULT_MS = 30_000;
/**
 * How long claims may keep failing on the connection before the runner gives up. A restart or a
 * failover of Postgres is over in seconds; an outage longer than a minute is better reported by
 * the process exiting (its supervisor restarts it with fresh connections, and pages if that keeps
 * failing) than hidden behind a runner that looks alive. The steps in flight retry their settles
 * within their own leases meanwhile (settle-retry.ts).
 */
const DATABASE_GONE_DEFAULT_MS = 60_000;
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
  const inflight = new StepsInFlight();
  const completions = new CompletionBatcher(runner.sql, runner.clock, undefined, runner.retryBackoff);
  let alertsPending = false;

  // Only the types this runner can run: a job of another type stays queued for a runner that has
  // it (never claimed and failed here). The registry is fixed for the run: listed once, not per claim.
  const types = runner.registry.list().map((t) => t.type);
  let idleDelay = IDLE_FIRST_WAIT_MS;
  /** When the last lease claimed so far ends, as first granted (Date.now() time). */
  let leasesEnd = 0;
  const stopping = () => options.signal?.aborted === true || Date.now() >= deadline || counts.claimed >= maxJobs || options.stopClaiming?.() === true;
  const running = () => inflight.size - completions.waiting;
  const retries = new ClaimRetries(runner);
  try {
    while (!stopping()) {
      const free = Math.min(concurrency - running(), maxJobs - counts.claimed);
      let claimed: Job[] = [];
      const settledBeforeClaim = inflight.settled;
      if (free > 0) {
        const round = await claimRound(runner, types, completions, inflight.steps, free, leasesEnd, { retries, signal: options.signal, deadline, stopping });
        claimed = round.jobs;
        leasesEnd = round.leasesEnd;
        counts.claimed += claimed.length;
        if (claimed.length > 0) idleDelay = IDLE_FIRST_WAIT_MS;
        for (const job of claimed) {
          inflight.add(runStep(runner, job, shutdown.signal, completions, round.sentAt).then((outcome) => {
            counts[outcome]++;
            if (outcome === 'failed') alertsPending = true;
          }));
        }
      }
      if (claimed.length === free && free > 0) continue;
      if (inflight.size > 0) {
        // Wait for a step to finish. Completions queued meanwhile stay for the next claim.
        const woken = inflight.nextSettle();
        completions.attach(inflight.wake);
        await woken;
        // Steps of one batch finish in the same tick: let them all queue, so the next claim is
        // one batch, not a trickle of ones.
        await new Promise((resolve) => setTimeout(resolve, 0));
      } else if (inflight.settled !== settledBeforeClaim) {
        // A step settled while the claim was out: the claim read the queue as of its snapshot,
        // before that settle committed, so a job it made due at once (a continue, a retry) may
        // be waiting unseen. Claim again before calling the queue drained or idle.
        continue;
      } else if (options.idleWaitMs !== undefined) {
        // Work came in recently: look again soon, backing off to idleWaitMs while nothing comes.
        await sleep(Math.min(idleDelay, options.idleWaitMs), options.signal);
        idleDelay *= 2;
      } else {
        break; // nothing due and nothing running: drained
      }
    }
    completions.detach();
    await Promise.all(inflight.steps);
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

/** Every claimed step until it is settled (running, or finished and waiting for its settle). */
class StepsInFlight {
  readonly steps = new Set<Promise<void>>();
  /** Steps settled so far: a claim sent before the latest of them may not have seen its job. */
  settled = 0;
  private waiter: (() => void) | null = null;

  get size(): number {
    return this.steps.size;
  }

  add(step: Promise<void>): void {
    const tracked: Promise<void> = step.finally(() => {
      this.steps.delete(tracked);
      this.settled++;
      this.wake();
    });
    this.steps.add(tracked);
  }

  /** Resolves at the next wake: a step settled, or a completion queued for the next claim. */
  nextSettle(): Promise<void> {
    return new Promise<void>((resolve) => (this.waiter = resolve));
  }

  readonly wake = (): void => {
    const resolve = this.waiter;
    this.waiter = null;
    resolve?.();
  };
}

/**
 * Whether a failed claim is claimed again, and after how long. Contention (a deadlock, a
 * serialization failure, a lock timeout) is retried for as long as it takes: the database
 * answered, the claim rolled back whole, and a runner that stopped for it would only hand its
 * contention to the next. A failed connection is retried until the database has been unreachable
 * for databaseGoneMs. Anything else is the statement's own error, and so is a claim left
 * unanswered (CLAIM_TIMEOUT): its late answer may yet lease jobs this loop would never run, so
 * the runner stops and reports rather than claiming past it.
 */
class ClaimRetries {
  private failures = 0;
  private unreachableSince: number | null = null;

  constructor(private readonly runner: Runner) {}

  succeeded(): void {
    this.failures = 0;
    this.unreachableSince = null;
  }

  /** The wait before claiming again, or null to stop with the error. */
  next(error: unknown, completions: number): number | null {
    const now = Date.now();
    let kind: 'contention' | 'connection';
    if (isContention(error)) {
      kind = 'contention';
      this.unreachableSince = null; // it answered
    } else if (isConnectionFailure(error)) {
      kind = 'connection';
      this.unreachableSince ??= now;
      if (now - this.unreachableSince >= (this.runner.databaseGoneMs ?? DATABASE_GONE_DEFAULT_MS)) return null;
    } else {
      return null;
    }
    this.failures++;
    const retryInMs = backoffDelayMs(this.failures, this.runner.retryBackoff ?? DATABASE_RETRY_BACKOFF);
    const e = error as { code?: unknown; message?: unknown };
    this.runner.warn?.({
      level: 'warn',
      msg: 'claim failed, retrying',
      workerId: this.runner.workerId,
      kind,
      code: typeof e.code === 'string' ? e.code : undefined,
      error: typeof e.message === 'string' ? e.message : String(error),
      failures: this.failures,
      retryInMs,
      completions,
    });
    return retryInMs;
  }
}

interface ClaimScope {
  retries: ClaimRetries;
  signal: AbortSignal | undefined;
  /** Date.now() time the budget ends. */
  deadline: number;
  stopping: () => boolean;
}

/**
 * One claim for up to `free` jobs, claimed again after a blip (see ClaimRetries). Finished steps'
 * completions ride with the claim: one round trip, one commit for both. Returns the claimed jobs
 * (none when the run stopped while a retry waited), when the claim was sent, and `leasesEnd`
 * moved out to the end of the last lease now held.
 */
async function claimRound(
  runner: Runner,
  types: readonly string[],
  completions: CompletionBatcher,
  inflight: Set<Promise<void>>,
  free: number,
  leasesEnd: number,
  scope: ClaimScope,
): Promise<{ jobs: Job[]; sentAt: number; leasesEnd: number }> {
  for (;;) {
    const finished = completions.take();
    completions.detach(); // completions finishing during the claim are flushed on their own
    let result: { settled: Set<string>; jobs: Job[] };
    const sentAt = Date.now();
    try {
      result = await answeredWithin(
        settleAndClaim(runner.sql, finished, { workerId: runner.workerId, pool: runner.pool, limit: free, now: runner.clock?.(), types }),
        runner.claimTimeoutMs ?? CLAIM_TIMEOUT_DEFAULT_MS,
      );
    } catch (error) {
      // The batched completions rolled back with the claim: each step writes its own again
      // (with its settle retries, within its lease), so none is lost whatever comes next.
      completions.fail(finished, error);
      const waitMs = scope.retries.next(error, finished.length);
      if (waitMs !== null) {
        await sleep(Math.min(waitMs, Math.max(0, scope.deadline - Date.now())), scope.signal);
        if (scope.stopping()) return { jobs: [], sentAt, leasesEnd };
        continue;
      }
      // Stop claiming, but give the steps in flight until the last of their leases ends to
      // finish and settle (retrying on the blip) before reporting: a finished step abandoned
      // by an exiting process would end as a crash. A query the driver left hanging does
      // not hold the report longer; that step ends when the caller ends the client.
      completions.detach();
      await settledOrAt(inflight, leasesEnd);
      throw error;
    }
    scope.retries.succeeded();
    completions.settle(finished, result.settled);
    for (const job of result.jobs) {
      const leaseMs = job.lockedUntil && job.claimedAt ? job.lockedUntil.getTime() - job.claimedAt.getTime() : 0;
      leasesEnd = Math.max(leasesEnd, sentAt + leaseMs);
    }
    return { jobs: result.jobs, sentAt, leasesEnd };
  }
}

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

