import { z } from '@hono/zod-openapi';
import type { JobWait } from '../../queue/index.ts';

export const waitSchema = z
  .object({
    name: z.string(),
    key: z.string().nullable(),
    step: z.string().openapi({ description: 'the step the job resumes at when the event (or the timeout) comes' }),
    since: z.string(),
    timeoutAt: z.string().nullable().openapi({ description: 'when the wait ends with a timeout outcome; null: it waits until signalled' }),
  })
  .nullable()
  .openapi('JobWait', { description: 'what the job waits for now (waitFor, queue/signals.ts): signal it by name (and key); null when it is not waiting' });

/** A job's open wait as the API shows it. */
export function waitJson(w: JobWait): NonNullable<z.infer<typeof waitSchema>> {
  return { name: w.name, key: w.key, step: w.step, since: w.since.toISOString(), timeoutAt: w.timeoutAt?.toISOString() ?? null };
}
