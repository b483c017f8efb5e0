import type { Queryable } from '../db.ts';
import { int, record, text } from './rows.ts';

/**
 * Statements only the benchmarks run (bench/): bulk fixtures written straight into the tables
 * (a million finished jobs would take hours through the runner) and figures read at a precision
 * the Job type does not keep. Never on a request path.
 */

/**
 * `n` due jobs of `type` in one statement, as a batch enqueue writes them: the enqueued event held
 * on the row (0160), no event row.
 */
export async function insertDueJobs(sql: Queryable, type: string, n: number): Promise<void> {
  await sql`
    insert into worker.jobs (type, payload, run_at, created_at, enqueued_event_id)
    select ${type}, '{}'::jsonb, now() - interval '1 minute', now() - interval '1 minute', nextval('worker.job_events_id_seq')
      from generate_series(1, ${n}::int)`;
}

/**
 * Jobs `from + 1`..`to` of `n` finished over the last six days (inside the default 7-day
 * retention), written in time order by one set-based statement (generate_series): a chunk of
 * 100,000 jobs is one round trip. Each has the history the engine writes for a one-step job
 * enqueued in a batch: its enqueued, claimed and done events held on the row (0160), under ids
 * taken from the events' sequence in that order, and no event row.
 */
export async function insertFinishedJobs(sql: Queryable, type: string, range: { from: number; to: number; n: number }): Promise<void> {
  await sql`
    insert into worker.jobs (type, payload, status, run_at, attempts, locked_by, lease_token, result,
                             created_at, started_at, claimed_at, finished_at, enqueued_event_id, claimed_event_id, done_event_id)
    select ${type}, '{}'::jsonb, 'done', ts, 1, 'loader', gen_random_uuid(), 'null'::jsonb,
           ts, ts + interval '1 ms', ts + interval '1 ms', ts + interval '5 ms',
           nextval('worker.job_events_id_seq'), nextval('worker.job_events_id_seq'), nextval('worker.job_events_id_seq')
      from (select now() - interval '6 days' + g * (interval '6 days' / ${range.n}::int) as ts
              from generate_series(${range.from + 1}::int, ${range.to}::int) g order by g) x`;
}

/** Rows in worker.jobs and worker.job_events (the sustained bench shows that pruning kept up). */
export async function jobAndEventRows(sql: Queryable): Promise<{ jobs: number; events: number }> {
  const [row] = await sql`
    select (select count(*) from worker.jobs)::int as jobs, (select count(*) from worker.job_events)::int as events`;
  const r = record(row, 'row counts');
  return { jobs: int(r.jobs, 'jobs'), events: int(r.events, 'events') };
}

/** Jobs not yet done. */
export async function unsettledJobCount(sql: Queryable): Promise<number> {
  const [row] = await sql`select count(*)::int as n from worker.jobs where status <> 'done'`;
  return int(record(row, 'count row').n, 'n');
}

/** Of these jobs: how many are not finished, and how many finished other than done. */
export async function finishCounts(sql: Queryable, ids: string[]): Promise<{ open: number; bad: number }> {
  const [row] = await sql`
    select count(*) filter (where finished_at is null)::int as open,
           count(*) filter (where status <> 'done' and finished_at is not null)::int as bad
      from worker.jobs where id = any(${ids}::uuid[])`;
  const r = record(row, 'finish counts');
  return { open: int(r.open, 'open'), bad: int(r.bad, 'bad') };
}

export interface JobTimes {
  id: string;
  /** Epoch ms with the microseconds Postgres keeps (a Date would round them away). */
  created: number;
  started: number;
  finished: number;
}

/** The jobs' times, and how many distinct owners (invocations) claimed them. */
export async function jobTimes(sql: Queryable, ids: string[]): Promise<{ rows: JobTimes[]; invocations: number }> {
  const rows = await sql`
    select id,
           extract(epoch from created_at)::float8 * 1000 as created,
           extract(epoch from started_at)::float8 * 1000 as started,
           extract(epoch from finished_at)::float8 * 1000 as finished
      from worker.jobs where id = any(${ids}::uuid[])`;
  // The job row keeps its last claimer (locked_by) after it finishes; the bench's jobs are claimed
  // once, so that is the one invocation that ran each (no claimed events needed).
  const [owners] = await sql`
    select count(distinct locked_by)::int as n from worker.jobs where id = any(${ids}::uuid[])`;
  return {
    rows: rows.map((row) => {
      const r = record(row, 'job times row');
      return { id: text(r.id, 'id'), created: int(r.created, 'created'), started: int(r.started, 'started'), finished: int(r.finished, 'finished') };
    }),
    invocations: int(record(owners, 'owner count').n, 'n'),
  };
}

/**
 * public.drain(): the runner's round trip as a procedure, for counting its instructions in one
 * backend (bench/instructions.sh): settle the last batch and claim the next 128 until the queue is empty.
 */
export async function createDrainProcedure(sql: Queryable): Promise<void> {
  await sql`
    create procedure public.drain() language plpgsql as $$
    declare done jsonb := '[]'; r json;
    begin
      loop
        r := worker.settle_and_claim(done, 'bench', null, 128);
        -- The next completions come from the table (the jobs this loop holds), not from parsing r:
        -- parsing json in SQL would cost more than writing it and would change with its format.
        select coalesce(jsonb_agg(jsonb_build_object('id', j.id, 'token', j.lease_token, 'result', null)), '[]') into done
          from worker.jobs j where j.status = 'running';
        commit;
        exit when jsonb_array_length(done) = 0;
      end loop;
    end $$`;
}
