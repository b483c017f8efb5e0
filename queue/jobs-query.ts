import { activeJobIdByCheckpoint, activeJobIdByPayload, idsByPayloadField, idsInStatus, jobsWithSubmitKeys, statusCountsBySubmitKeys, typeOfJob, zeroStatusCounts } from './driver/jobs.ts';
import type { Queryable } from './db.ts';
import { isJobId, type JobStatus, type JsonObject } from './job.ts';

/**
 * Read-only lookups over jobs that code outside the engine needs (the platform's jobs and
 * adapters): each returns typed values parsed once in the driver, so no caller reads a raw row.
 * They take ids, submit keys and payload values, never the caller's own tables: a query that
 * joins the platform's rows with jobs runs as one of these plus the caller's query over its own tables.
 */

/** The id of one queued or running job of `type` whose payload contains `match` (jsonb @>), or null. */
export async function findActiveJobId(sql: Queryable, type: string, match: JsonObject): Promise<string | null> {
  return activeJobIdByPayload(sql, type, match);
}

/**
 * The id of one queued or running job of `type` whose checkpoint contains `match` (jsonb @>), or
 * null: how a provider's callback that knows only the provider's id for the work (a Depot build
 * id) finds the job that checkpointed it. Scans the type's live jobs (no index on checkpoints).
 */
export async function findActiveJobIdByCheckpoint(sql: Queryable, type: string, match: JsonObject): Promise<string | null> {
  return activeJobIdByCheckpoint(sql, type, match);
}

/** The type of the job with this id, or null when there is no such job (or `id` is not a job id). */
export async function jobTypeOf(sql: Queryable, id: string): Promise<string | null> {
  if (!isJobId(id)) return null;
  return typeOfJob(sql, id);
}

export type JobStatusCounts = Record<JobStatus, number>;

/** How many of the jobs holding these submit keys are in each status (a key with no job counts nowhere). */
export async function jobStatusCountsBySubmitKeys(sql: Queryable, submitKeys: readonly string[]): Promise<JobStatusCounts> {
  if (submitKeys.length === 0) return zeroStatusCounts();
  return statusCountsBySubmitKeys(sql, submitKeys);
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
  return jobsWithSubmitKeys(sql, submitKeys, options);
}

/** Those of `ids` whose job exists and is in one of `statuses` (ids that are not job ids are never in it). */
export async function jobIdsInStatus(sql: Queryable, ids: readonly string[], statuses: readonly JobStatus[]): Promise<Set<string>> {
  const jobIds = [...new Set(ids.filter(isJobId))];
  if (jobIds.length === 0) return new Set();
  return idsInStatus(sql, jobIds, statuses);
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
  return idsByPayloadField(sql, options);
}
