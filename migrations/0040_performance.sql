-- Performance (issue 8): fewer index entries written per job transition.
--
-- Claim and settle are not HOT updates (status appears in index predicates), so every transition
-- writes a new entry into each index whose predicate the new row version matches. Two indexes
-- took an entry for every version of every job while only ever being searched by non-null keys:

-- submit_key: a full unique constraint indexes the NULL of every keyless job, on every update.
-- A partial unique index enforces the same uniqueness for the keys that exist (NULLs never
-- conflicted), and still serves `where submit_key = $1` and enqueue's ON CONFLICT.
alter table worker.jobs drop constraint jobs_submit_key_key;
create unique index jobs_submit_key_uq on worker.jobs (submit_key) where submit_key is not null;

-- Per-key concurrency counts running jobs of one key (`concurrency_key = $1`): jobs without a key
-- need no entry.
drop index worker.jobs_concurrency_idx;
create index jobs_concurrency_idx on worker.jobs (concurrency_key) where status = 'running' and concurrency_key is not null;

-- Batch completion: done for many jobs of one runner in one statement. Each element of p_done is
-- {id, token, result}; each row is fenced by its own lease token and running status exactly as a
-- single completion, and gets its own `done` event. Returns the ids whose fence held.
create function worker.complete_jobs(p_done jsonb, p_now timestamptz default null)
returns table (id uuid) language plpgsql as $$
begin
  return query
    with input as (
      select x.id, x.token, x.result from jsonb_to_recordset(p_done) as x(id uuid, token uuid, result jsonb)
    ), upd as (
      update worker.jobs j
         set status = 'done', result = coalesce(x.result, 'null'::jsonb), finished_at = coalesce(p_now, now()),
             locked_until = null, running_pool = null
        from input x
       -- Rows are found by primary key. IS NOT DISTINCT FROM states the same fence as = (status is
       -- never null) but keeps the planner off jobs_lease_idx, whose predicate = would match: with
       -- few running rows in its statistics it looks cheaper, and then walks every running job.
       where j.id = any (array(select i.id from input i)) and j.id = x.id and j.lease_token = x.token
         and j.status is not distinct from 'running'
      returning j.id, j.finished_at, j.attempts
    ), ev as (
      insert into worker.job_events (job_id, at, kind, detail)
      select u.id, u.finished_at, 'done', jsonb_build_object('attempt', u.attempts) from upd u
    )
    select u.id from upd u;
end $$;

-- A runner's round trip: write its finished steps' completions, then claim its next jobs, in one
-- statement and one commit. The claim runs after the completions, so it sees those jobs done
-- (pool capacity, per-key limits, dedupe keys). One json value comes back,
-- {settled: [ids whose fence held], jobs: [claimed rows]}: one value for the client to parse
-- instead of thirty-odd text columns per job. json, not jsonb: the rows are written out as text
-- once, without building (and key-sorting) a jsonb tree for every claimed row first.
create function worker.settle_and_claim(p_done jsonb, p_worker text, p_pool text, p_limit int, p_now timestamptz default null)
returns json language plpgsql as $$
declare
  v_settled json := '[]'::json;
  v_jobs    json;
begin
  if jsonb_array_length(coalesce(p_done, '[]'::jsonb)) > 0 then
    select coalesce(json_agg(c.id), '[]'::json) into v_settled from worker.complete_jobs(p_done, p_now) c;
  end if;
  select coalesce(json_agg(j), '[]'::json) into v_jobs from worker.claim_jobs(p_worker, p_pool, p_limit, p_now) j;
  return json_build_object('settled', v_settled, 'jobs', v_jobs);
end $$;
