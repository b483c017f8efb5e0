-- The dashboard at scale.
--
-- Steps per minute: the same steps as worker.step_stats (type, outcome, duration bucket), also by
-- the minute the step ended, so the dashboard draws throughput, failure rate and step latency
-- per type over time. worker.step_stats holds totals since the start (what /metrics counts);
-- this holds the last 7 days. The tick's roll-up pass (worker.rollup_job_events) writes both from
-- the same rows in the same statement, and prunes minutes older than 7 days as it goes. A minute
-- appears once the roll-up's lag (1 min) has passed it.
create table worker.step_minutes (
  minute   timestamptz not null,  -- the minute the step ended (date_trunc('minute', …))
  type     text not null,
  outcome  text not null,         -- as worker.step_stats
  bucket   smallint not null,     -- as worker.step_stats: worker.step_duration_bounds()
  steps    bigint not null,
  seconds  float8 not null,       -- sum of durations
  primary key (minute, type, outcome, bucket)
);

-- The step rows say when each step ended (the new ended_at column), for worker.step_minutes: a
-- function's result type changes only by dropping it. worker.current_step_stats (SQL, its body
-- checked when it is created) calls both and is applied before them, so each exists from here as
-- a stub with the new result type, which its own file replaces in the same migration run.
drop function worker.step_rows(bigint, bigint);
drop function worker.done_step_rows(timestamptz, timestamptz);
create function worker.step_rows(p_after bigint, p_upto bigint)
returns table (type text, outcome text, bucket smallint, seconds float8, ended_at timestamptz) language plpgsql stable as $$
begin raise exception 'replaced by migrations/functions/worker.step_rows.sql'; end $$;
create function worker.done_step_rows(p_after timestamptz, p_upto timestamptz)
returns table (type text, outcome text, bucket smallint, seconds float8, ended_at timestamptz) language plpgsql stable as $$
begin raise exception 'replaced by migrations/functions/worker.done_step_rows.sql'; end $$;

-- The dashboard's search by key: a submit key has its unique index (jobs_submit_key_uq); a dedupe
-- key had only partial unique indexes over jobs not yet ended. Only jobs with a dedupe key are in it.
create index jobs_dedupe_key_idx on worker.jobs (dedupe_key) where dedupe_key is not null;
