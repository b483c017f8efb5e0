import { z } from 'zod';
import { PermanentError } from '../../queue/errors.ts';
import type { JsonObject } from '../../queue/job.ts';

/**
 * A platform job's checkpoint, parsed at the step's start with the job's own schema instead of
 * cast. A checkpoint that does not parse was not written by this job's code (edited by hand, or
 * by an incompatible version): no retry can fix it, so the job fails permanently, naming the field.
 * Schemas are loose: a checkpoint carries other keys too (a provider retry's state), kept as they are.
 */
export function parseCheckpoint<T>(type: string, schema: z.ZodType<T>, checkpoint: JsonObject): T {
  const parsed = schema.safeParse(checkpoint);
  if (parsed.success) return parsed.data;
  const [issue] = parsed.error.issues;
  const field = issue?.path.map(String).join('.') || '(the whole checkpoint)';
  throw new PermanentError(`${type} checkpoint field ${field} is malformed: ${issue?.message ?? 'it does not parse'}`);
}
