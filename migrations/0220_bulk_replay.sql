-- Operations in bulk, the dead-letter view, replay (issue 19, item 4).
--
-- Bulk retry/cancel (worker.bulk_requeue, worker.bulk_cancel) run the single operations
-- (worker.requeue_job, worker.cancel_job) on every job a filter matches, a bounded batch per call
-- with an id cursor, so a filter of a million jobs is many short transactions, not one long one.
-- The filter is a worker.job_filter, built and checked from the caller's JSON by
-- worker.job_filter_of.
--
-- A failure's fingerprint (worker.error_fingerprint) is its last_error with ids, numbers, hex,
-- quoted values and timestamps replaced, hashed: jobs that failed the same way share it. It is
-- computed when read, not stored: a stored one would cost every retry's settle a regex pass, and
-- an index on it would tie the index to a function file that migrate.ts re-applies after the
-- migrations. Reads stay off the finished-job table's bulk instead: the dead letters (failed and
-- oom_killed) have their own small partial index, which the view and a bulk retry scan.
--
-- Replay (worker.replay_job) enqueues a new job from an ended one; the link is in both jobs'
-- history: 'replay_of' on the new job, 'replayed_by' on the old one.

create type worker.job_filter as (
  op             text,        -- 'requeue' | 'cancel': which jobs the statuses may name
  statuses       text[],
  type           text,
  created_after  timestamptz, -- inclusive
  created_before timestamptz, -- exclusive
  finished_after timestamptz,
  finished_before timestamptz,
  fingerprint    text
);

create index jobs_dead_letters_idx on worker.jobs (type, finished_at) where status in ('failed', 'oom_killed');

-- Every kind so far (0190's signal kinds included) and replay's two. The rows already there passed
-- the narrower check: not valid skips re-reading the whole history under this migration's lock
-- (new rows are checked all the same).
alter table worker.job_events drop constraint job_events_kind_check;
alter table worker.job_events add constraint job_events_kind_check check (kind in (
  'enqueued', 'superseded', 'claimed', 'heartbeat_lost', 'checkpoint', 'retry', 'lease_expired', 'escalated',
  'failed', 'oom_killed', 'cancel_requested', 'cancelled', 'done', 'requeued', 'rescheduled', 'priority_changed',
  'lease_released', 'resumed', 'waiting', 'signalled', 'wait_timed_out', 'replay_of', 'replayed_by')) not valid;

-- worker.error_fingerprint (SQL, its body checked when it is created) calls normalize_error and
-- is applied before it: a stub its own file replaces in the same migration run.
create function worker.normalize_error(p_error text) returns text language plpgsql
as $$ begin raise exception 'replaced by migrations/functions/worker.normalize_error.sql'; end $$;
