import type { Queryable } from '../db.ts';
import type { Job, JobEvent, JobStatus, JsonObject } from '../job.ts';
import type { InProgressJob, QueueDepth, RunningJob } from '../inspect.ts';
import { jobProgress } from '../progress.ts';
import type { SubmitKeyJob } from '../jobs-query.ts';
import { at } from './clock.ts';
import { int, jobStatus, parseJobEventRow, parseJobRow, record, text, textOrNull, time, timeOrNull } from './rows.ts';

/** Reads of worker.jobs and a job's history: the HTTP API, the CLI, the dashboard and the platform's jobs. */

/** Started and not finished: queue/progress.ts's isInProgress, as SQL (status is never null). */
export const inProgressCondition = (sql: Queryable) => sql`(status = 'running' or (status = 'queued' and started_at is not null))`;

export async function jobById(sql: Queryable, id: string): Promise<Job | null> {
  const [row] = await sql`select * from worker.jobs where id = ${id}`;
  return row ? parseJobRow(row) : null;
}

/** The job's history: its event rows and the events its row holds (worker.job_history, 0160). */
export async function eventsOf(sql: Queryable, jobId: string): Promise<JobEvent[]> {
  const rows = await sql`select * from worker.job_history where job_id = ${jobId} order by id`;
  return rows.map(parseJobEventRow);
}

/** What a page of jobs is filtered by: queue/inspect.ts's ListJobsOptions, parsed. */
export interface JobPageFilter {
  status?: JobStatus;
  type?: string;
  inProgress?: boolean;
  /** Jobs holding this submit key (jobs_submit_key_uq) or dedupe key (jobs_dedupe_key_idx, 0230). */
  key?: string;
  /** Jobs whose payload at `path` is `value` as text (`payload #>> path`): no index serves it. */
  payload?: { path: string[]; value: string };
  /** Only ids below this one (the cursor). */
  beforeId?: string;
  /** Only ids at or above this one (a creation-time floor: a range of the primary key). */
  sinceId?: string;
}

/** Newest first by id (UUIDv7: creation order), at most `limit`, after the cursor's id. */
export async function jobPage(sql: Queryable, filter: JobPageFilter, limit: number): Promise<Job[]> {
  const rows = await sql`
    select * from worker.jobs
     where true
       ${filter.status ? sql`and status = ${filter.status}` : sql``}
       ${filter.type ? sql`and type = ${filter.type}` : sql``}
       ${filter.inProgress === undefined ? sql`` : filter.inProgress ? sql`and ${inProgressCondition(sql)}` : sql`and not ${inProgressCondition(sql)}`}
       ${filter.key !== undefined ? sql`and (submit_key = ${filter.key} or dedupe_key = ${filter.key})` : sql``}
       ${filter.payload ? sql`and payload #>> ${filter.payload.path}::text[] = ${filter.payload.value}` : sql``}
       ${filter.beforeId ? sql`and id < ${filter.beforeId}::uuid` : sql``}
       ${filter.sinceId ? sql`and id >= ${filter.sinceId}::uuid` : sql``}
     order by id desc
     limit ${limit}`;
  return rows.map(parseJobRow);
}

export async function depthByStatusAndType(sql: Queryable): Promise<QueueDepth[]> {
  const rows = await sql`select status, type, count(*)::int as count from worker.jobs group by status, type order by status, type`;
  return rows.map((row) => {
    const r = record(row, 'depth row');
    return { status: jobStatus(r.status), type: text(r.type, 'type'), count: int(r.count, 'count') };
  });
}

/** Running jobs oldest step first, optionally only those whose step began over `olderThanMs` ago. */
export async function runningJobRows(sql: Queryable, olderThanMs: number | undefined, now: Date | undefined): Promise<RunningJob[]> {
  const rows = await sql`
    select id, type, step, locked_by, locked_until,
           (extract(epoch from ${at(sql, now)} - claimed_at) * 1000)::bigint as age_ms
      from worker.jobs
     where status = 'running'
       ${olderThanMs !== undefined ? sql`and claimed_at < ${at(sql, now)} - make_interval(secs => ${olderThanMs}::bigint / 1000.0)` : sql``}
     order by claimed_at`;
  return rows.map((row) => {
    const r = record(row, 'running job row');
    return {
      id: text(r.id, 'id'),
      type: text(r.type, 'type'),
      step: text(r.step, 'step'),
      owner: textOrNull(r.locked_by, 'locked_by'),
      runningForMs: int(r.age_ms, 'age_ms'),
      lockedUntil: timeOrNull(r.locked_until, 'locked_until'),
    };
  });
}

/**
 * Jobs in progress: running ones oldest step first, then those queued between steps, next due
 * first (parked last), at most `limit`. Each half is read through its status's partial index.
 */
export async function inProgressJobRows(sql: Queryable, limit: number, now: Date | undefined): Promise<InProgressJob[]> {
  const rows = await sql`
    (select id, type, status, step, attempts, started_at, run_at, locked_by, last_error,
            (extract(epoch from ${at(sql, now)} - claimed_at) * 1000)::bigint as age_ms, 0 as part, claimed_at as sort_at
       from worker.jobs where status = 'running' order by claimed_at limit ${limit})
    union all
    (select id, type, status, step, attempts, started_at, run_at, null, last_error, null, 1, run_at
       from worker.jobs where status = 'queued' and started_at is not null order by run_at limit ${limit})
    order by part, sort_at
    limit ${limit}`;
  return rows.map((row) => {
    const r = record(row, 'in-progress job row');
    const job = { status: jobStatus(r.status), attempts: int(r.attempts, 'attempts'), step: text(r.step, 'step'), runAt: time(r.run_at, 'run_at'), startedAt: timeOrNull(r.started_at, 'started_at') };
    const progress = jobProgress(job);
    return {
      id: text(r.id, 'id'),
      type: text(r.type, 'type'),
      status: job.status,
      step: job.step,
      owner: textOrNull(r.locked_by, 'locked_by'),
      runningForMs: r.age_ms === null ? null : int(r.age_ms, 'age_ms'),
      nextStepAt: progress.nextStepAt,
      failures: progress.failures,
      lastError: textOrNull(r.last_error, 'last_error'),
    };
  });
}

function ids(rows: readonly unknown[]): string[] {
  return rows.map((row) => text(record(row, 'id row').id, 'id'));
}

/** One queued or running job of `type` whose payload contains `match` (jsonb @>). */
export async function activeJobIdByPayload(sql: Queryable, type: string, match: JsonObject): Promise<string | null> {
  return activeJobIdContaining(sql, type, 'payload', match);
}

export async function activeJobIdByCheckpoint(sql: Queryable, type: string, match: JsonObject): Promise<string | null> {
  return activeJobIdContaining(sql, type, 'checkpoint', match);
}

async function activeJobIdContaining(sql: Queryable, type: string, column: 'payload' | 'checkpoint', match: JsonObject): Promise<string | null> {
  const rows = await sql`
    select id from worker.jobs
     where type = ${type} and status in ('queued', 'running') and ${sql(column)} @> ${sql.json(match)}::jsonb
     limit 1`;
  return ids(rows)[0] ?? null;
}

export async function typeOfJob(sql: Queryable, id: string): Promise<string | null> {
  const [row] = await sql`select type from worker.jobs where id = ${id}`;
  return row ? text(record(row, 'type row').type, 'type') : null;
}

export function zeroStatusCounts(): Record<JobStatus, number> {
  return { queued: 0, running: 0, done: 0, failed: 0, cancelled: 0, oom_killed: 0 };
}

export async function statusCountsBySubmitKeys(sql: Queryable, submitKeys: readonly string[]): Promise<Record<JobStatus, number>> {
  const counts = zeroStatusCounts();
  const rows = await sql`
    select status, count(*)::int as n from worker.jobs
     where submit_key = any(${[...submitKeys]}::text[])
     group by status`;
  for (const row of rows) {
    const r = record(row, 'status count row');
    counts[jobStatus(r.status)] = int(r.n, 'n');
  }
  return counts;
}

export async function jobsWithSubmitKeys(
  sql: Queryable,
  submitKeys: readonly string[],
  options: { statuses?: readonly JobStatus[]; limit?: number },
): Promise<SubmitKeyJob[]> {
  const rows = await sql`
    select j.id, j.submit_key, j.status, j.last_error
      from unnest(${[...submitKeys]}::text[]) with ordinality as k(submit_key, ord)
      join worker.jobs j on j.submit_key = k.submit_key
     ${options.statuses ? sql`where j.status = any(${[...options.statuses]}::text[])` : sql``}
     order by k.ord
     ${options.limit === undefined ? sql`` : sql`limit ${options.limit}`}`;
  return rows.map((row) => {
    const r = record(row, 'submit key job row');
    return { id: text(r.id, 'id'), submitKey: text(r.submit_key, 'submit_key'), status: jobStatus(r.status), lastError: textOrNull(r.last_error, 'last_error') };
  });
}

export async function idsInStatus(sql: Queryable, jobIds: string[], statuses: readonly JobStatus[]): Promise<Set<string>> {
  const rows = await sql`
    select id from worker.jobs
     where id = any(${jobIds}::uuid[]) and status = any(${[...statuses]}::text[])`;
  return new Set(ids(rows));
}

export async function idsByPayloadField(sql: Queryable, options: { type: string; field: string; values: readonly string[]; limit: number }): Promise<string[]> {
  const rows = await sql`
    select id from worker.jobs
     where type = ${options.type} and payload->>${options.field} = any(${[...options.values]}::text[])
     order by created_at
     limit ${options.limit}`;
  return ids(rows);
}
