-- Signals: a step ends by waiting for a named event (optionally with a correlation key and a
-- timeout); the job is parked (queued at its resume step, run_at = the timeout or infinity, so
-- claims pass it by) until worker.signal delivers an event or the timeout makes it due.
--
-- The wait itself is a row of its own (a job waits for at most one thing), so the claim and the
-- jobs row stay as they are. An event that finds no open wait is kept in signal_events and is
-- consumed by the next wait on it: no lost wakeup when the event comes first. Every transition
-- holds the job's row lock, and a wait or an event on a (name, key) also holds that pair's
-- signal_channels row, so a signal and a settling wait serialize: one of them sees the other.
-- Lock order, everywhere: channel, then job, then the wait row.

create table worker.job_waits (
  job_id      uuid primary key,
  name        text not null,
  -- '' when the wait has no correlation key (kept not null so (name, key) is one index lookup)
  key         text not null default '',
  -- the step the job resumes at: its step while it waits
  step        text not null,
  since       timestamptz not null,
  -- null: waits until signalled
  timeout_at  timestamptz
);
create index job_waits_channel_idx on worker.job_waits (name, key);

-- Events that arrived while nobody waited on them: for one job (job_id), or for the next wait on
-- (name, key) by any job (job_id null). Consumed oldest first, each exactly once (deleted).
create table worker.signal_events (
  id          bigint generated always as identity primary key,
  name        text not null,
  key         text not null default '',
  job_id      uuid,
  payload     jsonb,
  created_at  timestamptz not null
);
create index signal_events_job_idx on worker.signal_events (job_id, name, id) where job_id is not null;
create index signal_events_channel_idx on worker.signal_events (name, key, id) where job_id is null;
create index signal_events_created_idx on worker.signal_events (created_at);

-- One row per (name, key) ever waited on or signalled: the lock that orders a wait against a
-- signal for every job on that pair (worker.concurrency_keys does the same for claims).
create table worker.signal_channels (
  name  text not null,
  key   text not null,
  primary key (name, key)
);

-- The history's three new kinds. Added not valid, then validated: the scan of a large history
-- runs under a lock that lets writes go on.
alter table worker.job_events drop constraint job_events_kind_check;
alter table worker.job_events add constraint job_events_kind_check check (kind in ('enqueued', 'superseded', 'claimed',
  'heartbeat_lost', 'checkpoint', 'retry', 'lease_expired', 'escalated', 'failed', 'oom_killed', 'cancel_requested',
  'cancelled', 'done', 'requeued', 'rescheduled', 'priority_changed', 'lease_released', 'resumed',
  'waiting', 'signalled', 'wait_timed_out')) not valid;
alter table worker.job_events validate constraint job_events_kind_check;
