CREATE OR REPLACE FUNCTION worker.set_job_priority(p_id uuid, p_priority integer, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS worker.jobs
 LANGUAGE plpgsql
AS $function$
declare
  v_now timestamptz := coalesce(p_now, now());
  v_was worker.jobs;
  v_job worker.jobs;
begin
  if p_priority is null or p_priority not between 0 and 1000 then
    raise exception 'priority must be an integer from 0 to 1000' using errcode = 'SB400', column = 'priority';
  end if;
  v_was := worker.lock_job_for(p_id, 'change the priority of', '{queued,running}');
  update worker.jobs set priority = p_priority where id = p_id returning * into v_job;
  insert into worker.job_events (job_id, at, kind, detail)
  values (p_id, v_now, 'priority_changed', jsonb_build_object('from', v_was.priority, 'to', p_priority));
  return v_job;
end $function$
;
