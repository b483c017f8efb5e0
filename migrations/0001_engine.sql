-- The durable job engine: every job, step checkpoint, lease and event is a row in schema `worker`.
create schema if not exists worker;

-- Registered job types. Enqueue (from TypeScript or plain SQL) rejects a type that is not here,
-- and the claim takes each type's lease length from here.
create table worker.job_types (
  type          text primary key check (type ~ '^[a-z][a-z0-9_]{0,62}$'),
  lease_ms      int  not null default 120000 check (lease_ms between 1000 and 3600000),
  max_attempts  int  not null default 3 check (max_attempts >= 1),
  weight        text not null default 'light'
);

-- Weight classes: a crashed job (lease expired without a settle) is re-queued one rank up;
-- a crash at the top rank ends it `oom_killed`. `cost` is what a running job of the class
-- counts against its pool's capacity.
create table worker.weight_classes (
  name  text primary key,
  rank  int  not null unique,
  cost  int  not null check (cost >= 1)
);
insert into worker.weight_classes (name, rank, cost) values ('light', 1, 1), ('heavy', 2, 2);

alter table worker.job_types add foreign key (weight) references worker.weight_classes (name);

create table worker.jobs (
  id                  uuid primary key default gen_random_uuid(),
  type                text not null references worker.job_types (type),
  payload             jsonb not null default '{}'::jsonb check (jsonb_typeof(payload) = 'object'),
  status              text not null default 'queued'
                      check (status in ('queued', 'running', 'done', 'failed', 'cancelled', 'oom_killed')),
  priority            int  not null default 50 check (priority between 0 and 1000),
  run_at              timestamptz not null default now(),
  attempts            int  not null default 0,
  max_attempts        int  not null default 3 check (max_attempts >= 1),
  locked_until        timestamptz,
  locked_by           text,
  lease_token         uuid,
  dedupe_key          text,
  submit_key          text unique,
  last_error          text,
  result              jsonb,
  -- resumable step state: the step to run next and what earlier steps saved for it
  step                text not null default 'start',
  checkpoint          jsonb not null default '{}'::jsonb,
  -- routing: a runner of pool P claims rows whose pool is P or null
  pool                text,
  weight              text not null default 'light' references worker.weight_classes (name),
  running_pool        text,
  -- optional per-key concurrency limit (e.g. 2 concurrent provisions per account)
  concurrency_key     text,
  concurrency_limit   int check (concurrency_limit >= 1),
  cancel_requested_at timestamptz,
  cancel_reason       text,
  superseded_by       uuid,
  crashes             int  not null default 0,
  created_at          timestamptz not null default now(),
  started_at          timestamptz,  -- first claim; a started job is "active" for its dedupe key
  claimed_at          timestamptz,  -- latest claim
  finished_at         timestamptz,
  check ((concurrency_key is null) = (concurrency_limit is null)),
  check (result is null or status = 'done'),
  check ((status in ('done', 'failed', 'cancelled', 'oom_killed')) = (finished_at is not null))
);

-- The claim reads queued rows in (priority, run_at) order and stops after LIMIT: a partial
-- index holding only queued rows keeps that walk as short as the queue, however many finished
-- rows the table retains.
create index jobs_claimable_idx on worker.jobs (priority, run_at) where status = 'queued';
-- Crash recovery scans running rows by lease expiry; again only the running rows are indexed.
create index jobs_lease_idx on worker.jobs (locked_until) where status = 'running';
-- Debounce: at most one *waiting* (never started) job per dedupe key, and at most one *active*
-- (started, not finished: running, or queued between steps) job per key. Unique indexes, so
-- concurrent pushes cannot both win.
create unique index jobs_dedupe_waiting_uq on worker.jobs (dedupe_key)
  where status = 'queued' and started_at is null and dedupe_key is not null;
create unique index jobs_dedupe_active_uq on worker.jobs (dedupe_key)
  where status in ('queued', 'running') and started_at is not null and dedupe_key is not null;
-- Per-key concurrency counts running jobs of a key.
create index jobs_concurrency_idx on worker.jobs (concurrency_key) where status = 'running';
-- Listing newest first (keyset on created_at, id) and pruning finished rows by age.
create index jobs_created_idx on worker.jobs (created_at desc, id desc);
create index jobs_finished_idx on worker.jobs (finished_at) where finished_at is not null;

create table worker.job_events (
  id      bigint generated always as identity primary key,
  job_id  uuid not null,
  at      timestamptz not null default now(),
  kind    text not null check (kind in ('enqueued', 'superseded', 'claimed', 'heartbeat_lost', 'checkpoint',
          'retry', 'lease_expired', 'escalated', 'failed', 'oom_killed', 'cancel_requested', 'cancelled',
          'done', 'requeued', 'rescheduled', 'priority_changed', 'lease_released', 'resumed')),
  detail  jsonb not null default '{}'::jsonb
);
-- Events are read per job and pruned by age; no foreign key, so history survives a job's
-- pruning until its own retention passes.
create index job_events_job_idx on worker.job_events (job_id, id);
create index job_events_at_idx on worker.job_events (at);

-- The leader lease (one row per name): renew if held and unexpired, acquire if free or expired.
create table worker.leader_lease (
  name         text primary key default 'default',
  holder       text,
  acquired_at  timestamptz,
  expires_at   timestamptz,
  generation   bigint not null default 0
);
insert into worker.leader_lease (name) values ('default');

-- Capacity per pool: whether it may claim at all, and the maximum running weight.
create table worker.pool_capacity (
  pool                text primary key,
  enabled             boolean not null default true,
  max_running_weight  int not null check (max_running_weight >= 0)
);

-- One row per concurrency key, locked by claimers so per-key limits hold under concurrency.
create table worker.concurrency_keys (
  key text primary key
);

create table worker.alerts (
  id            bigint generated always as identity primary key,
  kind          text not null,   -- poison_job | stuck_job | lease_oom | schedule_missed | leader_churn
  key           text not null,   -- what the alert is about (a job id, a schedule name)
  job_id        uuid,
  message       text not null,
  detail        jsonb not null default '{}'::jsonb,
  opened_at     timestamptz not null default now(),
  last_seen_at  timestamptz not null default now(),
  notified_at   timestamptz,
  resolved_at   timestamptz,
  occurrences   int not null default 1
);
-- The same open alert is one row, not one per sweep.
create unique index alerts_open_uq on worker.alerts (kind, key) where resolved_at is null;

-- Raised errors use custom SQLSTATEs so callers can tell them apart:
--   SB400 invalid input (message names the field), SB409 submit_key reused with another request.

-- The built-in sample types (a runner's registry sync keeps these rows in step with its code).
insert into worker.job_types (type, lease_ms, max_attempts) values
  ('uppercase', 120000, 3), ('countdown', 120000, 3), ('fail', 120000, 3);
