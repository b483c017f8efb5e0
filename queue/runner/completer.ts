// The batch completer: plain completions written together, with the next claim or on a timer,
// so a batch of short jobs costs one commit rather than one per job.
import { DATABASE_RETRY_BACKOFF, retryContended, type Backoff } from '../database-errors.ts';
import { completeJobs } from '../settle.ts';
import type { Sql } from '../db.ts';
import type { Job, Json } from '../job.ts';

/** Tries of one batched completion statement before its steps each write their own. */
const COMPLETE_BATCH_TRIES = 3;

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
    private readonly backoff: Backoff = DATABASE_RETRY_BACKOFF,
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
          // One statement: a try that met contention wrote nothing, so the batch is written again
          // a few times before its steps fall back to writing their own (each then retries within
          // its lease): the group commit survives a deadlock instead of turning into N statements.
          const settled = await retryContended(() => completeJobs(this.sql, batch, { now: this.clock?.() }), {
            tries: COMPLETE_BATCH_TRIES,
            backoff: this.backoff,
          });
          this.settle(batch, settled);
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
