CREATE OR REPLACE FUNCTION worker.fail_job(p_id uuid, p_reason text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS worker.jobs
 LANGUAGE plpgsql
AS $function$
declare
  v_now timestamptz := coalesce(p_now, now());
  v_job worker.jobs;
begin
  -- An operator ends a queued or running job as failed (a running owner's fenced settle then
  -- matches nothing). The reason is the job's last_error.
  if coalesce(p_reason, '') ~ '^[[:space:]]*$' then
    raise exception 'a reason is required to fail a job' using errcode = 'SB400', column = 'reason';
  end if;
  perform worker.lock_job_for(p_id, 'fail', '{queued,running}');
  update worker.jobs set status = 'failed', last_error = p_reason, finished_at = v_now, locked_until = null, running_pool = null
   where id = p_id returning * into v_job;
  insert into worker.job_events (job_id, at, kind, detail)
  values (p_id, v_now, 'failed', jsonb_build_object('reason', p_reason, 'manual', true));
  return v_job;
end $function$
;
