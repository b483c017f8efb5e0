import { z } from 'zod';
import type { Queryable } from './db.ts';
import { isJobId, JOB_STATUSES, type JobStatus, type JsonObject } from './job.ts';

/**
 * Read-only lookups over worker.jobs that code outside the engine needs (the platform's jobs and
 * adapters): each returns typed values parsed here once, so no caller reads a raw row. They take
 * ids, submit keys and payload values, never the caller's own tables: a query that joins the
 * platform's rows with jobs runs as one of these plus the caller's query over its own tables.
 */

const idRow = z.object({ id: z.string() });
const typeRow = z.object({ type: z.string() });
const statusCountRow = z.object({ status: z.enum(JOB_STATUSES), n: z.number().int() });
const submitKeyJobRow = z.object({ id: z.string(), submit_key: z.string(), status: z.enum(JOB_STATUSES), last_error: z.string().nullable() });

/** The id of one queued or running job of `type` whose payload contains `match` (jsonb @>), or null. */
export async function findActiveJobId(sql: Queryable, type: string, match: JsonObject): Promise<string | null> {
  const rows = await sql`
    select id from worker.jobs
     where type = ${type} and status in ('queued', 'running') and payload @> ${sql.json(match)}::jsonb
     limit 1`;
  const [row] = rows.map((r) => idRow.parse(r));
  return row ? row.id : null;
}

/** The type of the job with this id, or null when there is no such job (or `id` is not a job id). */
export async function jobTypeOf(sql: Queryable, id: string): Promise<string | null> {
  if (!isJobId(id)) return null;
  const rows = await sql`select type from worker.jobs where id = ${id}`;
  const [row] = rows.map((r) => typeRow.parse(r));
  return row ? row.type : null;
}

export type JobStatusCounts = Record<JobStatus, number>;

/** How many of the jobs holding these submit keys are in each status (a key with no job counts nowhere). */
export async function jobStatusCountsBySubmitKeys(sql: Queryable, submitKeys: readonly string[]): Promise<JobStatusCounts> {
  const counts = Object.fromEntries(JOB_STATUSES.map((s) => [s, 0])) as JobStatusCounts;
  if (submitKeys.length === 0) return counts;
  const rows = await sql`
    select status, count(*)::int as n from worker.jobs
     where submit_key = any(${submitKeys as string[]}::text[])
     group by status`;
  for (const r of rows.map((row) => statusCountRow.parse(row))) counts[r.status] = r.n;
  return counts;
}

export interface SubmitKeyJob {
  id: string;
  submitKey: string;
  status: JobStatus;
  lastError: string | null;
}

/**
 * The jobs holding these submit keys, in the order the keys are given (keys with no job are
 * skipped), optionally only those in `statuses` and at most `limit` of them.
 */
export async function jobsBySubmitKeys(
  sql: Queryable,
  submitKeys: readonly string[],
  options: { statuses?: readonly JobStatus[]; limit?: number } = {},
): Promise<SubmitKeyJob[]> {
  if (submitKeys.length === 0) return [];
  const rows = await sql`
    select j.id, j.submit_key, j.status, j.last_error
      from unnest(${submitKeys as string[]}::text[]) with ordinality as k(submit_key, ord)
      join worker.jobs j on j.submit_key = k.submit_key
     ${options.statuses ? sql`where j.status = any(${options.statuses as string[]}::text[])` : sql``}
     order by k.ord
     ${options.limit === undefined ? sql`` : sql`limit ${options.limit}`}`;
  return rows.map((r) => {
    const row = submitKeyJobRow.parse(r);
    return { id: row.id, submitKey: row.submit_key, status: row.status, lastError: row.last_error };
  });
}

/** Those of `ids` whose job exists and is in one of `statuses` (ids that are not job ids are never in it). */
export async function jobIdsInStatus(sql: Queryable, ids: readonly string[], statuses: readonly JobStatus[]): Promise<Set<string>> {
  const jobIds = [...new Set(ids.filter(isJobId))];
  if (jobIds.length === 0) return new Set();
  const rows = await sql`
    select id from worker.jobs
     where id = any(${jobIds}::uuid[]) and status = any(${statuses as string[]}::text[])`;
  return new Set(rows.map((r) => idRow.parse(r).id));
}

/**
 * Ids of jobs of `type` whose payload's top-level `field` (as text) is one of `values`, oldest
 * first (by created_at), at most `limit`.
 */
export async function jobIdsByPayloadField(
  sql: Queryable,
  options: { type: string; field: string; values: readonly string[]; limit: number },
): Promise<string[]> {
  if (options.values.length === 0) return [];
  const rows = await sql`
    select id from worker.jobs
     where type = ${options.type} and payload->>${options.field} = any(${options.values as string[]}::text[])
     order by created_at
     limit ${options.limit}`;
  return rows.map((r) => idRow.parse(r).id);
}
