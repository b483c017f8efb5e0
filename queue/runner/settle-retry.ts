// Which errors are a blip (contention, a dropped connection) is decided in one place for the whole
// engine: queue/database-errors.ts. A settle that failed with one wrote nothing (each settle is one
// statement or one transaction), so writing it again is safe.
import { backoffDelayMs, DATABASE_RETRY_BACKOFF, isTransientDatabaseError, type Backoff } from '../database-errors.ts';

export { isTransientDatabaseError };

/** A settle that kept failing with a transient error until its retries had to stop. */
export class SettleFailed extends Error {
  constructor(override readonly cause: unknown, readonly tries: number) {
    super(errorMessage(cause));
    this.name = 'SettleFailed';
  }
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message || error.name : String(error);
}

export interface SettleRetryScope {
  /** False once the retries must stop: the lease is lost or ends before the next try, or the runner stops past its grace. */
  mayRetry(nextTryAt: number): boolean;
  /** Aborted when the wait between tries must end early. */
  readonly signal: AbortSignal;
  /** Counts the retries (for the step's log line). */
  retried(): void;
  /**
   * Local time (Date.now()) until which the lease is known held; it may move later while a try
   * runs (the heartbeat). A try still unanswered then is abandoned.
   */
  heldUntil: number;
  /** The waits between tries (default DATABASE_RETRY_BACKOFF: 50 ms doubling to 2 s). */
  readonly backoff?: Backoff;
}

/**
 * Write a settle; while it fails with a transient error, wait (exponential backoff with jitter)
 * and write it again, as long as the scope allows. A non-transient error is thrown as it is; a
 * transient one the scope stopped retrying is thrown as SettleFailed.
 */
export async function writeSettle<T>(scope: SettleRetryScope, write: () => Promise<T>, random: () => number = Math.random): Promise<T> {
  for (let tries = 1; ; tries++) {
    try {
      return await answeredWhileHeld(scope, write());
    } catch (error) {
      if (error instanceof SettleFailed) throw error;
      if (!isTransientDatabaseError(error)) throw error;
      const wait = backoffDelayMs(tries, scope.backoff ?? DATABASE_RETRY_BACKOFF, random);
      if (!scope.mayRetry(Date.now() + wait)) throw new SettleFailed(error, tries);
      scope.retried();
      await pause(wait, scope.signal);
      if (!scope.mayRetry(Date.now())) throw new SettleFailed(error, tries);
    }
  }
}

/**
 * The try's answer, or SettleFailed once the lease is no longer known held without one. A driver
 * can leave a query on a cut connection unanswered for as long as its connect timeout (30 s);
 * past the lease the rescue may hand the job on, so waiting longer only keeps a runner that
 * should report the outage from reporting it. Whatever the abandoned query does later is fenced.
 */
function answeredWhileHeld<T>(scope: SettleRetryScope, attempt: Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const unanswered = new Promise<never>((_, reject) => {
    const check = () => {
      const left = scope.heldUntil - Date.now();
      if (left > 0) timer = setTimeout(check, left);
      else reject(new SettleFailed(Object.assign(new Error('the database did not answer the settle while the lease was held'), { code: 'SETTLE_TIMEOUT' }), 1));
    };
    check();
  });
  attempt.catch(() => {}); // an abandoned try's late error has no one to tell
  return Promise.race([attempt, unanswered]).finally(() => clearTimeout(timer));
}

function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}
