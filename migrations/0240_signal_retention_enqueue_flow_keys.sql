-- Signal retention, an enqueue's own rate limit and fairness key, resuming a rate key.
--
-- Retention of the signals' rows (0190 never deleted them): the prune's worker.prune_signals
-- deletes the waits and kept events of jobs that ended or are gone, kept events older than the
-- kept-event retention (dropped unconsumed, and counted), and the channels nothing is left on.
-- worker.lock_signal_channel now makes a channel again when the prune deleted it between its
-- insert and its lock.
--
-- An enqueue may name its own rate limit ({key, limit, per}) and fairness key, over its type's
-- (worker.prepare_flow_keys): the single enqueue takes them as two new trailing arguments, the
-- batch as fields of its elements. A SQL function's arguments change only by dropping it; the
-- SQL wrapper worker.enqueue_job (its body checked when it is created, and applied before
-- worker.enqueue_job_ex) needs the new enqueue_job_ex to exist, so that one exists from here as
-- a stub with the new arguments, which its own file replaces in the same migration run. (A new
-- database has no enqueue_job yet here: its file makes it after the migrations.)
drop function if exists worker.enqueue_job(text, jsonb, integer, timestamptz, integer, text, text, text, text, text, integer, bigint, bigint, text);
drop function worker.enqueue_job_ex(text, jsonb, integer, timestamptz, integer, text, text, text, text, text, integer, bigint, timestamptz, bigint, text);
create function worker.enqueue_job_ex(p_type text, p_payload jsonb default '{}', p_priority integer default 50,
  p_run_at timestamptz default null, p_max_attempts integer default null, p_dedupe_key text default null,
  p_submit_key text default null, p_pool text default null, p_weight text default null, p_concurrency_key text default null,
  p_concurrency_limit integer default null, p_delay_ms bigint default null, p_now timestamptz default null,
  p_deadline_ms bigint default null, p_deadline_severity text default null, p_rate_limit jsonb default null,
  p_fairness_key text default null)
returns jsonb language plpgsql as $$
begin raise exception 'replaced by migrations/functions/worker.enqueue_job_ex.sql'; end $$;


-- A concurrency or fairness key is made by worker.payload_key now, which names the key in its
-- refusal; the old helper has no caller left.
drop function if exists worker.type_concurrency_key(text, jsonb);
