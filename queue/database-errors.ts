// Which database errors are worth trying again, and how long to wait between tries. The one home
// for these decisions: the claim, the claim loop, the settle writer, the batch completer, bulk
// walks and maintenance passes all ask here, so a code added or dropped changes them together.

/**
 * Contention: the database answered, and the answer is "not now, another transaction was in the
 * way" — deadlock_detected (40P01), serialization_failure (40001), lock_not_available (55P03, a
 * lock_timeout or NOWAIT). Postgres rolled the statement's transaction back whole, so it wrote
 * nothing and running it again is safe; the docs' lock order makes it rare, never impossible
 * (a caller's own transaction, an operator's SQL, a future feature can still take locks out of
 * order). Not a reason for a runner to stop, however often it happens.
 */
const CONTENTION_CODES = new Set(['40P01', '40001', '55P03']);

/**
 * The connection failed rather than the statement: the socket dropped, the server restarted or is
 * starting, or it has no connection slot free. The statement may not have run at all; what ran
 * without committing rolled back.
 */
const CONNECTION_CODES = new Set([
  // node's socket errors
  'ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENETDOWN', 'EAI_AGAIN',
  // postgres.js: the socket closed under a query, or connecting timed out. Not CONNECTION_ENDED or
  // CONNECTION_DESTROYED: those mean the client's owner ended it, and every retry would fail alike.
  'CONNECTION_CLOSED', 'CONNECT_TIMEOUT',
  // Postgres: admin_shutdown (pg_terminate_backend, a restart), crash_shutdown, cannot_connect_now,
  // too_many_connections
  '57P01', '57P02', '57P03', '53300',
]);

function codeOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

/** A deadlock, serialization failure or lock timeout: nothing was written; try again after a backoff. */
export function isContention(error: unknown): boolean {
  const code = codeOf(error);
  return code !== undefined && CONTENTION_CODES.has(code);
}

/** The connection to the database failed (class 08, a restart, a dropped socket): not the statement's fault. */
export function isConnectionFailure(error: unknown): boolean {
  const code = codeOf(error);
  return code !== undefined && (CONNECTION_CODES.has(code) || code.startsWith('08')); // class 08: connection exception
}

/**
 * A blip rather than an answer about the statement: contention or a failed connection. A
 * statement (or one short transaction) that failed with one wrote nothing, so writing it again is
 * safe; any other error is the statement's own (a constraint, bad input) and is not retried.
 */
export function isTransientDatabaseError(error: unknown): boolean {
  return isContention(error) || isConnectionFailure(error);
}

/** Exponential backoff: the first wait, doubling per failure up to the cap. */
export interface Backoff {
  firstMs: number;
  maxMs: number;
}

/** The engine's backoff between tries of a statement the database refused for a blip. */
export const DATABASE_RETRY_BACKOFF: Backoff = { firstMs: 50, maxMs: 2_000 };

/**
 * The wait before try `failures + 1`: uniform in [d/2, d], d = firstMs·2^(failures-1) capped at
 * maxMs. The jitter spreads out the tries of transactions that failed together, which would
 * otherwise meet again in the same locks.
 */
export function backoffDelayMs(failures: number, backoff: Backoff = DATABASE_RETRY_BACKOFF, random: () => number = Math.random): number {
  const d = Math.min(backoff.maxMs, backoff.firstMs * 2 ** Math.max(0, failures - 1));
  return Math.round(d / 2 + random() * (d / 2));
}

export interface ContentionRetry {
  /** Tries in all (the first included) before the contention error is thrown. */
  tries: number;
  backoff?: Backoff;
  random?: () => number;
  /** Also retry these (e.g. the claim's dedupe race); contention always is. */
  alsoRetry?: (error: unknown) => boolean;
  /** Told of each failed try that will be tried again, before the wait. */
  onRetry?: (error: unknown, failures: number, waitMs: number) => void;
}

/**
 * Run `op`; while it fails with contention, wait (backoff with jitter) and run it again, at most
 * `tries` times in all. For an operation that is one statement or one transaction, so a failed
 * try wrote nothing. Any other error, and the last contention error, is thrown as it is.
 */
export async function retryContended<T>(op: () => Promise<T>, options: ContentionRetry): Promise<T> {
  for (let failures = 0; ; ) {
    try {
      return await op();
    } catch (error) {
      failures++;
      if (!(isContention(error) || options.alsoRetry?.(error)) || failures >= options.tries) throw error;
      const wait = backoffDelayMs(failures, options.backoff, options.random);
      options.onRetry?.(error, failures, wait);
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }
}
