import type { Queryable } from '../db.ts';
import type { Job, JobEvent, JobStatus } from '../job.ts';
import { int, parseJobEventRow, parseJobRow, record, text } from './rows.ts';

/**
 * Whole-table reads and resets for the tools that check the engine from outside (the model and
 * chaos replays, the soak, the benchmarks): what River's driver offers its tests as TableTruncate.
 * Never on a request path: they read every row.
 */

/**
 * Empty the job tables (jobs, their events, alerts, waits and kept events, child joins) and the
 * rate keys' starts and pauses between runs of a benchmark or a model history.
 */
export async function truncateEngineTables(sql: Queryable): Promise<void> {
  await sql`truncate worker.jobs, worker.job_events, worker.alerts, worker.job_waits, worker.signal_events, worker.child_joins cascade`;
  await sql`update worker.rate_limits set starts = '{}', paused_until = null, pause_reason = null`;
  // a new history starts with no retention cut (the next one may run on an earlier pinned clock)
  await sql`update worker.event_retention set kept_from = '-infinity'`;
}

/** Every job, optionally of one type and/or status, in id (creation) order. */
export async function allJobs(sql: Queryable, filter: { type?: string; status?: JobStatus; ids?: readonly string[] } = {}): Promise<Job[]> {
  const rows = await sql`
    select * from worker.jobs
     where true
       ${filter.type ? sql`and type = ${filter.type}` : sql``}
       ${filter.status ? sql`and status = ${filter.status}` : sql``}
       ${filter.ids ? sql`and id = any(${[...filter.ids]}::uuid[])` : sql``}
     order by id`;
  return rows.map(parseJobRow);
}

/** Every event (of the jobs of one type, or of `kind`, or written after event `afterId`), in write order. */
export async function allEvents(sql: Queryable, filter: { type?: string; kind?: string; jobIds?: readonly string[]; afterId?: number } = {}): Promise<JobEvent[]> {
  const rows = await sql`
    select e.* from worker.job_history e
     where true
       ${filter.type ? sql`and e.job_id in (select j.id from worker.jobs j where j.type = ${filter.type})` : sql``}
       ${filter.kind ? sql`and e.kind = ${filter.kind}` : sql``}
       ${filter.jobIds ? sql`and e.job_id = any(${[...filter.jobIds]}::uuid[])` : sql``}
       ${filter.afterId !== undefined ? sql`and e.id > ${filter.afterId}` : sql``}
     order by e.id`;
  return rows.map(parseJobEventRow);
}

/** Running jobs, and queued ones due by the database's clock or later. */
/** The ids of the signal events kept for a wait (worker.signal_events), for the model's prune check. */
export async function keptSignalEventIds(sql: Queryable): Promise<Set<number>> {
  const rows = await sql`select id from worker.signal_events`;
  return new Set(rows.map((r) => Number(r.id)));
}

export async function openJobCounts(sql: Queryable): Promise<{ running: number; due: number; later: number }> {
  const [row] = await sql`
    select count(*) filter (where status = 'running')::int as running,
           count(*) filter (where status = 'queued' and run_at <= now())::int as due,
           count(*) filter (where status = 'queued' and run_at > now())::int as later
      from worker.jobs`;
  const r = record(row, 'open job counts');
  return { running: int(r.running, 'running'), due: int(r.due, 'due'), later: int(r.later, 'later') };
}

/**
 * What a correct engine never writes, counted: a job done twice (two done events), a result on a
 * job that is not done (or none on one that is), two jobs of one submit key.
 */
export async function doubledWrites(sql: Queryable): Promise<{ doneTwice: number; strayResults: number; submitTwice: number }> {
  const [row] = await sql`
    select (select count(*)::int from (select job_id from worker.job_history where kind = 'done' group by job_id having count(*) > 1) d) as done_twice,
           (select count(*)::int from worker.jobs where (result is not null) <> (status = 'done')) as stray_results,
           (select count(*)::int from (select submit_key from worker.jobs where submit_key is not null group by submit_key having count(*) > 1) s) as submit_twice`;
  const r = record(row, 'doubled writes');
  return { doneTwice: int(r.done_twice, 'done_twice'), strayResults: int(r.stray_results, 'stray_results'), submitTwice: int(r.submit_twice, 'submit_twice') };
}

/** What a running job of each weight class counts against its pool. */
export async function weightCosts(sql: Queryable): Promise<Record<string, number>> {
  const rows = await sql`select name, cost from worker.weight_classes`;
  return Object.fromEntries(rows.map((row) => {
    const r = record(row, 'weight class row');
    return [text(r.name, 'name'), int(r.cost, 'cost')];
  }));
}

/** The lease a type's claims get, as the registry sync stored it; null for a type not synced. */
export async function leaseMsOf(sql: Queryable, type: string): Promise<number | null> {
  const [row] = await sql`select lease_ms from worker.job_types where type = ${type}`;
  return row ? int(record(row, 'job type row').lease_ms, 'lease_ms') : null;
}

/** Enable a pool with this capacity (weighted running jobs), creating it if new. */
export async function setPoolCapacity(sql: Queryable, pool: string, maxRunningWeight: number): Promise<void> {
  await sql`
    insert into worker.pool_capacity (pool, enabled, max_running_weight) values (${pool}, true, ${maxRunningWeight})
    on conflict (pool) do update set enabled = true, max_running_weight = excluded.max_running_weight`;
}

/** Lock one job's row until the caller's transaction ends, changing nothing: a transaction stalled between two statements, as tests stage it. */
export async function lockJobRow(sql: Queryable, id: string): Promise<void> {
  await sql`select id from worker.jobs where id = ${id} for update`;
}
