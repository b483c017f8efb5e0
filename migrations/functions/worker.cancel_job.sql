CREATE OR REPLACE FUNCTION worker.cancel_job(p_id uuid, p_reason text DEFAULT 'cancelled by operator'::text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS worker.jobs
 LANGUAGE plpgsql
AS $function$
declare
  v_now    timestamptz := coalesce(p_now, now());
  v_reason text := coalesce(nullif(btrim(p_reason), ''), 'cancelled by operator');
  v_was    worker.jobs;
  v_job    worker.jobs;
begin
  -- A job that never started is cancelled at once. A started one (running, or queued between
  -- steps with work outstanding at a provider) gets a request: the runner runs its type's cancel
  -- hook at the next step boundary, then ends it cancelled. A second request changes nothing.
  -- A parent's unfinished children are cancelled with it: its tree is locked first, in the
  -- engine's one lock order (worker.lock_job_trees), then each child's cancel runs under it.
  perform worker.lock_job_trees(array[p_id]);
  v_was := worker.lock_job_for(p_id, 'cancel', '{queued,running}');
  perform worker.cancel_children(p_id, v_reason, v_now);
  if v_was.status = 'queued' and v_was.started_at is null then
    update worker.jobs set status = 'cancelled', finished_at = v_now, last_error = v_reason,
                           cancel_requested_at = v_now, cancel_reason = v_reason
     where id = p_id returning * into v_job;
    insert into worker.job_events (job_id, at, kind, detail)
    values (p_id, v_now, 'cancelled', jsonb_build_object('reason', v_reason, 'hookRan', false));
  elsif v_was.cancel_requested_at is not null then
    v_job := v_was;
  else
    -- a queued job becomes due, so its cancel hook runs next
    update worker.jobs set cancel_requested_at = v_now, cancel_reason = v_reason,
                           run_at = case when status = 'queued' then v_now else run_at end
     where id = p_id returning * into v_job;
    insert into worker.job_events (job_id, at, kind, detail) values (p_id, v_now, 'cancel_requested', jsonb_build_object('reason', v_reason));
  end if;
  return v_job;
end $function$
;
