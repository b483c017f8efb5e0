/** Bad input: the message names the problem and `field` the offending field. Nothing was written. */
export class ValidationError extends Error {
  readonly code = 'invalid_input';
  constructor(message: string, readonly field?: string) {
    super(message);
    this.name = 'ValidationError';
  }
}

/** A submit_key reused with a different request (HTTP 409). */
export class ConflictError extends Error {
  readonly code = 'conflict';
  constructor(message: string, readonly field?: string) {
    super(message);
    this.name = 'ConflictError';
  }
}

/** The job does not exist (HTTP 404). */
export class NotFoundError extends Error {
  readonly code = 'not_found';
  constructor(message: string) {
    super(message);
    this.name = 'NotFoundError';
  }
}

/** Thrown by a handler when retrying cannot help (bad payload, a rejected request): the job fails at once. */
export class PermanentError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PermanentError';
  }
}

interface PgError {
  code?: string;
  message: string;
  column_name?: string;
}

/** Maps the engine's SQLSTATEs (SB400, SB404, SB409) to typed errors; anything else passes through. */
export function translatePgError(error: unknown): unknown {
  const e = error as PgError;
  if (e && typeof e === 'object') {
    if (e.code === 'SB400') return new ValidationError(e.message, e.column_name);
    if (e.code === 'SB404') return new NotFoundError(e.message);
    if (e.code === 'SB409') return new ConflictError(e.message, e.column_name);
  }
  return error;
}

/**
 * Thrown by a handler when a provider refused the step for its rate limit (a 429): a job with a
 * rate key pauses the whole key for `retryAfterMs` and runs again then, its attempt unspent
 * (queue/runner/rate-limited.ts). Any error with `rateLimited: true` and a `retryAfterMs` counts
 * (a port's own error class need not extend this one).
 */
export class RateLimitedError extends Error {
  readonly rateLimited = true;
  constructor(message: string, readonly retryAfterMs: number) {
    super(message);
    this.name = 'RateLimitedError';
  }
}

export function isRateLimited(error: unknown): error is { rateLimited: true; retryAfterMs: number; message?: string } {
  const e = error as { rateLimited?: unknown; retryAfterMs?: unknown } | null;
  return !!e && typeof e === 'object' && e.rateLimited === true && typeof e.retryAfterMs === 'number' && e.retryAfterMs >= 0;
}
