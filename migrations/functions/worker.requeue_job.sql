CREATE OR REPLACE FUNCTION worker.requeue_job(p_id uuid, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS worker.jobs
 LANGUAGE plpgsql
AS $function$
declare
  v_now timestamptz := coalesce(p_now, now());
  v_was worker.jobs;
  v_job worker.jobs;
begin
  -- Run an ended job again from its checkpoint, with fresh attempts (its poison alert is resolved
  -- by the requeued event's trigger).
  v_was := worker.lock_job_for(p_id, 'requeue', '{failed,cancelled,oom_killed}');
  begin
    update worker.jobs set status = 'queued', attempts = 0, run_at = v_now, finished_at = null, locked_until = null,
                           cancel_requested_at = null, cancel_reason = null, last_error = null
     where id = p_id returning * into v_job;
  exception when unique_violation then
    raise exception 'cannot change job %: another job with its dedupe key is already waiting or active', p_id using errcode = 'SB409';
  end;
  insert into worker.job_events (job_id, at, kind, detail) values (p_id, v_now, 'requeued', jsonb_build_object('from', v_was.status));
  return v_job;
end $function$
;
