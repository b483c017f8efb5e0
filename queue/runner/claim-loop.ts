// The claim loop: claims batches as steps free up, starts each step, waits, and stops on the
// budget, maxJobs, shutdown or an empty queue. What a step does once claimed is step.ts's job.
import { deliverPendingAlerts } from '../alerts.ts';
import { settleAndClaim } from '../claim.ts';
import type { Job } from '../job.ts';
import { CompletionBatcher } from './completer.ts';
import { runStep } from './step.ts';
import type { RunCounts, Runner, RunOptions } from './types.ts';

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
  const inflight = new StepsInFlight();
  const completions = new CompletionBatcher(runner.sql, runner.clock);
  let alertsPending = false;

  // Only the types this runner can run: a job of another type stays queued for a runner that has
  // it (never claimed and failed here). The registry is fixed for the run: listed once, not per claim.
  const types = runner.registry.list().map((t) => t.type);
  let idleDelay = IDLE_FIRST_WAIT_MS;
  /** When the last lease claimed so far ends, as first granted (Date.now() time). */
  let leasesEnd = 0;
  const stopping = () => options.signal?.aborted === true || Date.now() >= deadline || counts.claimed >= maxJobs || options.stopClaiming?.() === true;
  const running = () => inflight.size - completions.waiting;
  try {
    while (!stopping()) {
      const free = Math.min(concurrency - running(), maxJobs - counts.claimed);
      let claimed: Job[] = [];
      const settledBeforeClaim = inflight.settled;
      if (free > 0) {
        const round = await claimRound(runner, types, completions, inflight.steps, free, leasesEnd);
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
 * One claim round trip for up to `free` jobs. Finished steps' completions ride with the claim: one
 * round trip, one commit for both. Returns the claimed jobs, when the claim was sent, and
 * `leasesEnd` moved out to the end of the last lease now held.
 */
async function claimRound(
  runner: Runner,
  types: readonly string[],
  completions: CompletionBatcher,
  inflight: Set<Promise<void>>,
  free: number,
  leasesEnd: number,
): Promise<{ jobs: Job[]; sentAt: number; leasesEnd: number }> {
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
  for (const job of result.jobs) {
    const leaseMs = job.lockedUntil && job.claimedAt ? job.lockedUntil.getTime() - job.claimedAt.getTime() : 0;
    leasesEnd = Math.max(leasesEnd, sentAt + leaseMs);
  }
  return { jobs: result.jobs, sentAt, leasesEnd };
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

