import type { Context } from 'hono';
import type { z } from 'zod';
import { HttpError } from './errors.ts';

export const MAX_JSON_DEPTH = 32;

/** Depth of nested objects/arrays: Postgres refuses very deep jsonb, so we refuse it first, clearly. */
export function jsonDepth(value: unknown, depth = 0): number {
  if (depth > MAX_JSON_DEPTH || value === null || typeof value !== 'object') return depth;
  let max = depth;
  for (const v of Object.values(value as object)) max = Math.max(max, jsonDepth(v, depth + 1));
  return max;
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
  return schema.parse(value);
}
