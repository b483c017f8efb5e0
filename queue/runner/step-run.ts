// One claimed step's lease while it runs: its abort signal, its heartbeat, the lease time its
// settle retries may use, and the StepContext a handler sees.
import type { Backoff } from '../database-errors.ts';
import type { Sql } from '../db.ts';
import type { Job, JsonObject } from '../job.ts';
import { jobChildren, type ChildOutcome } from '../children.ts';
import type { StepContext } from '../registry.ts';
import { heartbeat } from '../settle.ts';
import { handlerCheckpoint, waitStateOf, type WaitEvent } from '../signals/wait.ts';
import { writeSettle, type SettleRetryScope } from './settle-retry.ts';
import type { Runner } from './types.ts';

/**
 * One claimed step while it runs and until it is settled: its lease state, its abort signal and
 * its heartbeat. A class rather than closures, because a runner creates one per job and a batch
 * of thousands of short jobs spends measurable time creating (and, bundled with keepNames,
 * naming) closures. It is also the scope of the step's settle retries (SettleRetryScope): the
 * heartbeat keeps the lease while a settle is written again after a database blip.
 */
export class StepRun implements SettleRetryScope {
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

  get backoff(): Backoff | undefined {
    return this.runner.retryBackoff;
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
export class Context implements StepContext<unknown> {
  readonly job: Job;
  readonly step: string;
  readonly checkpoint: JsonObject;
  readonly attempt: number;
  readonly sql: Sql;
  event: WaitEvent | undefined;
  /** Resumed from a wait that ended without an event: the runner writes its timeout before the step runs. */
  readonly waitUnresolved: boolean;

  constructor(
    private readonly run: StepRun,
    readonly payload: unknown,
  ) {
    this.job = run.job;
    this.step = run.job.step;
    this.checkpoint = handlerCheckpoint(run.job.checkpoint);
    const wait = waitStateOf(run.job);
    this.event = wait.event;
    this.waitUnresolved = wait.unresolved;
    this.attempt = run.job.attempts;
    this.sql = run.runner.sql;
  }

  get signal(): AbortSignal {
    return this.run.signal;
  }

  now(): Date {
    return this.run.runner.clock?.() ?? new Date();
  }

  async children(): Promise<ChildOutcome[]> {
    return (await jobChildren(this.sql, this.job.id))?.children ?? [];
  }
}
