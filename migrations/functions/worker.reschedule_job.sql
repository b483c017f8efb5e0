CREATE OR REPLACE FUNCTION worker.reschedule_job(p_id uuid, p_run_at timestamp with time zone, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS worker.jobs
 LANGUAGE plpgsql
AS $function$
declare
  v_now timestamptz := coalesce(p_now, now());
  v_was worker.jobs;
  v_job worker.jobs;
begin
  -- Move a queued job's run_at (run now, or later; 'infinity' parks it until resumed).
  if p_run_at is null then
    raise exception 'runAt must be a valid time' using errcode = 'SB400', column = 'runAt';
  end if;
  v_was := worker.lock_job_for(p_id, 'reschedule', '{queued}');
  update worker.jobs set run_at = p_run_at where id = p_id returning * into v_job;
  insert into worker.job_events (job_id, at, kind, detail)
  values (p_id, v_now, 'rescheduled', jsonb_build_object('from', worker.event_time(v_was.run_at), 'to', worker.event_time(p_run_at)));
  return v_job;
end $function$
;
