-- Deadlines: a job type, or a single job at enqueue, declares how long a job may take from
-- enqueue to done (the operations manual's "SLA escalation — infra jobs: 4h with no PR → P1
-- alert"), and how loud missing it is: 'warning', or 'critical' (the manual's P1). A per-job
-- deadline overrides its type's.
--
-- The enqueue resolves the deadline to an instant on the job row (deadline_at, with its
-- severity), so the leader's tick finds the jobs past it with a range scan of one small partial
-- index (only jobs with a deadline that have not ended are in it) and never joins the types.
-- The tick opens one `deadline_missed` alert per such job (key: the job id), resolved when the
-- job ends; a second unique index makes a second alert for one job impossible, so a resolved
-- one is never reopened and concurrent ticks open one.

alter table worker.job_types
  -- 1 ms to 30 days: beyond a month a deadline is no SLA anyone watches
  add column deadline_ms bigint check (deadline_ms between 1 and 2592000000),
  add column deadline_severity text check (deadline_severity in ('warning', 'critical')),
  add constraint job_types_deadline_pair check ((deadline_ms is null) = (deadline_severity is null));

alter table worker.jobs
  add column deadline_at timestamptz,
  add column deadline_severity text check (deadline_severity in ('warning', 'critical')),
  add constraint jobs_deadline_pair check ((deadline_at is null) = (deadline_severity is null));

create index jobs_deadline_idx on worker.jobs (deadline_at)
  where deadline_at is not null and status in ('queued', 'running');

-- Alerts had no severity: every kind before this one is a warning (the manual's stuck-job alert
-- is one); a deadline's alert carries its job's.
alter table worker.alerts
  add column severity text not null default 'warning' check (severity in ('warning', 'critical'));

create unique index alerts_deadline_missed_uq on worker.alerts (key) where kind = 'deadline_missed';

-- The enqueue functions take the per-job deadline as two more arguments (their files define
-- the new signatures): the old ones go, so a call cannot resolve to a signature without them.
-- worker.enqueue_job (SQL, its body checked when it is created) calls enqueue_job_ex and is
-- applied before it, so the new signature of enqueue_job_ex exists from here, as a stub its own
-- file replaces in the same migration run.
drop function worker.enqueue_job(text, jsonb, integer, timestamptz, integer, text, text, text, text, text, integer, bigint);
drop function worker.enqueue_job_ex(text, jsonb, integer, timestamptz, integer, text, text, text, text, text, integer, bigint, timestamptz);
create function worker.enqueue_job_ex(p_type text, p_payload jsonb, p_priority integer, p_run_at timestamptz,
  p_max_attempts integer, p_dedupe_key text, p_submit_key text, p_pool text, p_weight text, p_concurrency_key text,
  p_concurrency_limit integer, p_delay_ms bigint, p_now timestamptz, p_deadline_ms bigint, p_deadline_severity text)
returns jsonb language plpgsql as $$ begin raise exception 'replaced by migrations/functions/worker.enqueue_job_ex.sql'; end $$;
