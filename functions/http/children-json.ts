import { z } from '@hono/zod-openapi';
import { JOB_STATUSES, type JobFamily } from '../../queue/index.ts';
import { producedJson, type Scrub } from './serialize.ts';

/** How many children a job's answer lists (a billing run has one per account); `total` counts them all. */
export const LISTED_CHILDREN = 1000;

const json = z.unknown().openapi({ description: 'any JSON value' });

export const childrenSchema = z
  .object({
    waitNo: z.number().int(),
    join: z.enum(['all', 'first', 'count']),
    need: z.number().int(),
    total: z.number().int(),
    ended: z.number().int(),
    created: z.number().int(),
    nextStep: z.string(),
    createdAt: z.string(),
    joinedAt: z.string().nullable(),
    children: z.array(z.object({
      id: z.string(),
      type: z.string().nullable(),
      status: z.enum([...JOB_STATUSES, 'pruned']),
      result: json,
      lastError: z.string().nullable(),
      submitKey: z.string().nullable(),
      finishedAt: z.string().nullable(),
    })),
  })
  .nullable()
  .openapi('JobChildren', { description: "the job's latest spawn (queue/children.ts): its join and its children's outcomes, the first 1000 in the order given; null if it never spawned" });

/** A job's family as the API shows it: its parent's id, and its latest wait with the children's outcomes (results and errors as producedJson shows them). */
export function familyJson(family: JobFamily, scrub: Scrub): { parentId: string | null; children: z.infer<typeof childrenSchema> } {
  const w = family.children;
  return {
    parentId: family.parentId,
    children: w && {
      waitNo: w.waitNo, join: w.join, need: w.need, total: w.total, ended: w.ended, created: w.created, nextStep: w.nextStep,
      createdAt: w.createdAt.toISOString(), joinedAt: w.joinedAt?.toISOString() ?? null,
      children: w.children.map((c) => ({
        id: c.id, type: c.type, status: c.status, result: producedJson(c.result, scrub), lastError: producedJson(c.lastError, scrub), submitKey: c.submitKey,
        finishedAt: c.finishedAt?.toISOString() ?? null,
      })),
    },
  };
}
