import type { Context } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { z } from 'zod';
import { ConflictError, isContention, NotFoundError, ValidationError } from '../../queue/index.ts';
import { ConfigError, type WorkerEnv } from '../config.ts';
import { envSecrets } from '../invocation.ts';
import { scrubText } from '../lib/redact.ts';

/** Every error answer: {error: {code, message, field?}}. */
export class HttpError extends Error {
  constructor(readonly status: ContentfulStatusCode, readonly code: string, message: string, readonly field?: string) {
    super(message);
  }
}

export function errorBody(code: string, message: string, field?: string) {
  return { error: { code, message, ...(field ? { field } : {}) } };
}

/** The field a zod issue is about, as a dotted path (`jobs.3.type`). */
export function zodField(error: z.ZodError): { field: string | undefined; message: string } {
  const issue = error.issues[0]!;
  const field = issue.path.length ? issue.path.map(String).join('.') : undefined;
  const message = issue.code === 'unrecognized_keys' ? `unknown field(s): ${issue.keys.join(', ')}` : issue.message;
  return { field: field ?? (issue.code === 'unrecognized_keys' ? issue.keys[0] : undefined), message: field ? `${field}: ${message}` : message };
}

// postgres.js connection codes, socket errnos (Node, and the Worker's socket in
// ../cloudflare-socket.ts), and SQLSTATEs for a lost or refused connection.
const UNAVAILABLE_CODES = new Set([
  'CONNECTION_CLOSED', 'CONNECTION_ENDED', 'CONNECTION_DESTROYED', 'CONNECT_TIMEOUT', 'DATABASE_UNREACHABLE',
  'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EPIPE',
  '57P01', '57P02', '57P03', '53300',
]);

/** The database could not be reached or dropped the connection: a 503 the client may retry, not a 500. */
export function isDatabaseUnavailable(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && (UNAVAILABLE_CODES.has(code) || /^08[0-9A-Z]{3}$/.test(code));
}

export function toHttpError(error: unknown): HttpError | null {
  if (error instanceof HttpError) return error;
  if (error instanceof ValidationError) return new HttpError(400, 'invalid_input', error.message, error.field);
  if (error instanceof ConflictError) return new HttpError(409, 'conflict', error.message, error.field);
  if (error instanceof NotFoundError) return new HttpError(404, 'not_found', error.message);
  if (error instanceof z.ZodError) {
    const { field, message } = zodField(error);
    return new HttpError(400, 'invalid_input', message, field);
  }
  if (error instanceof ConfigError) return new HttpError(503, 'not_configured', `refusing to run: ${error.message}`);
  if (isDatabaseUnavailable(error)) return new HttpError(503, 'database_unavailable', 'the database is unavailable; try again shortly');
  // A deadlock, serialization failure or lock timeout rolled the request's transaction back
  // whole: nothing was written, and the same request may simply be sent again.
  if (isContention(error)) {
    return new HttpError(503, 'database_busy', 'the database was busy with a conflicting change (a deadlock or a lock timeout); nothing was written: try again');
  }
  return null;
}

export function respondError(c: Context, error: unknown) {
  const known = toHttpError(error);
  if (known?.status === 503) c.header('Retry-After', '5');
  if (known) return c.json(errorBody(known.code, known.message, known.field), known.status);
  const line = JSON.stringify({ level: 'error', msg: 'unhandled error', error: (error as Error)?.message ?? String(error) });
  console.error(scrubText(line, envSecrets((c.env ?? {}) as WorkerEnv)));
  return c.json(errorBody('internal', 'internal error'), 500);
}
