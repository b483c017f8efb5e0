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

/** The field a zod issue is about, as a dotted path (`jobs.3.type`), and what is wrong with it. */
export function zodField(error: z.ZodError): { field: string | undefined; message: string } {
  const first = error.issues[0]!;
  const { path, message } = first.code === 'unrecognized_keys'
    ? { path: first.path, message: `unknown field(s): ${first.keys.join(', ')}` }
    : issueText(first);
  const field = path.length ? path.map(String).join('.') : undefined;
  return { field: field ?? (first.code === 'unrecognized_keys' ? first.keys[0] : undefined), message: field ? `${field}: ${message}` : message };
}

type Issue = z.core.$ZodIssue;

const shown = (value: unknown) => (typeof value === 'string' ? JSON.stringify(value) : String(value));

/** `must be 1`, `must be one of 1, 3 or 5`: the allowed values themselves, strings quoted. */
function allowedValues(values: readonly unknown[]): string {
  const list = [...new Set(values.map(shown))];
  return list.length === 1 ? list[0]! : `one of ${list.slice(0, -1).join(', ')} or ${list.at(-1)}`;
}

const article = (noun: string) => (/^[aeiou]/.test(noun) ? `an ${noun}` : `a ${noun}`);

/**
 * What is wrong, in words that say what would be accepted. zod's own text names the allowed
 * values of an enum or a literal only in its own notation ("expected one of "a"|"b"") and says
 * just "Invalid input" for a union of literals (`controlPlanes`: 1, 3 or 5), so a refusal of a
 * value from a fixed set is written here from the issue's values. A union's branch that got past
 * the type check and failed deeper (a list of statuses holding an unknown one) is the one shown,
 * at its own path.
 */
function issueText(issue: Issue): { path: readonly PropertyKey[]; message: string } {
  if (issue.code === 'invalid_value') return { path: issue.path, message: `must be ${allowedValues(issue.values)}` };
  if (issue.code !== 'invalid_union' || issue.errors.length === 0) return { path: issue.path, message: issue.message };
  const deeper = issue.errors.filter((branch) => branch[0] && branch[0].path.length > 0);
  if (deeper.length === 1) {
    const inner = issueText(deeper[0]![0]!);
    return { path: [...issue.path, ...inner.path], message: inner.message };
  }
  const firsts = issue.errors.map((branch) => branch[0]);
  if (!firsts.every((i) => i && i.path.length === 0 && (i.code === 'invalid_value' || i.code === 'invalid_type'))) {
    return { path: issue.path, message: issue.message };
  }
  const values = firsts.flatMap((i) => (i!.code === 'invalid_value' ? i!.values : []));
  const types = [...new Set(firsts.flatMap((i) => (i!.code === 'invalid_type' ? [article(i!.expected)] : [])))];
  const alternatives = [...(values.length ? [allowedValues(values)] : []), ...types];
  // `one of "a" or "b", or an array`: the comma keeps a list of values apart from the other shapes
  const message = alternatives.length === 1 ? alternatives[0]! : `${alternatives.slice(0, -1).join(', ')}${values.length > 1 ? ',' : ''} or ${alternatives.at(-1)}`;
  return { path: issue.path, message: `must be ${message}` };
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
