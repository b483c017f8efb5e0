import type { Context } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import type { z } from 'zod';
import { errorBody, HttpError } from './errors.ts';

export const MAX_JSON_DEPTH = 32;

/** Depth of nested objects/arrays: Postgres refuses very deep jsonb, so we refuse it first, clearly. */
export function jsonDepth(value: unknown, depth = 0): number {
  if (depth > MAX_JSON_DEPTH || value === null || typeof value !== 'object') return depth;
  let max = depth;
  for (const v of Object.values(value as object)) max = Math.max(max, jsonDepth(v, depth + 1));
  return max;
}

// NUL, or a UTF-16 surrogate without its partner: JSON can carry both, Postgres text and jsonb cannot.
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** Whether Postgres can store this string as text or jsonb. */
export function storableText(text: string): boolean {
  return !UNSTORABLE.test(text);
}

/** The dotted path of the first string (key or value) Postgres could not store, or null. */
export function unstorablePath(value: unknown, path = ''): string | null {
  if (typeof value === 'string') return storableText(value) ? null : path || '(body)';
  if (value === null || typeof value !== 'object') return null;
  for (const [k, v] of Object.entries(value as object)) {
    const at = path ? `${path}.${k}` : k;
    if (!storableText(k)) return at;
    const found = unstorablePath(v, at);
    if (found) return found;
  }
  return null;
}

/**
 * Read and validate a JSON body. An empty body counts as `{}` when `emptyAsObject` (action
 * routes with optional fields); malformed JSON and schema violations are 400s naming the field.
 */
export async function readJson<S extends z.ZodType>(c: Context, schema: S, options: { emptyAsObject?: boolean } = {}): Promise<z.output<S>> {
  const text = await c.req.text();
  let value: unknown;
  if (text.trim() === '' && options.emptyAsObject) {
    value = {};
  } else {
    try {
      value = JSON.parse(text);
    } catch {
      throw new HttpError(400, 'invalid_json', 'the body is not valid JSON');
    }
  }
  if (jsonDepth(value) > MAX_JSON_DEPTH) {
    throw new HttpError(400, 'invalid_input', `the body nests deeper than ${MAX_JSON_DEPTH} levels`);
  }
  const unstorable = unstorablePath(value);
  if (unstorable) {
    throw new HttpError(400, 'invalid_input', `${unstorable}: contains a NUL character or an unpaired UTF-16 surrogate, which cannot be stored`, unstorable);
  }
  return schema.parse(value);
}

/** Refuse a body over `maxSize` bytes before it is read: 413 payload_too_large. */
export function limitBody(maxSize: number) {
  return bodyLimit({ maxSize, onError: (c) => c.json(errorBody('payload_too_large', `the body is larger than ${maxSize} bytes`), 413) });
}
