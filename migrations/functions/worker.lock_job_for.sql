CREATE OR REPLACE FUNCTION worker.lock_job_for(p_id uuid, p_verb text, p_from text[])
 RETURNS worker.jobs
 LANGUAGE plpgsql
AS $function$
declare
  v_job worker.jobs;
begin
  -- The first statement of every manual operation (worker.requeue_job, fail_job, …): the job's
  -- row, locked until the operation's transaction ends, or SB404; and SB409 when its status does
  -- not allow the operation (the message names the status and the ones that would).
  select * into v_job from worker.jobs j where j.id = p_id for update;
  if not found then
    raise exception 'no job %', p_id using errcode = 'SB404';
  end if;
  if not (v_job.status = any (p_from)) then
    raise exception 'cannot % job %: it is % (allowed from %)', p_verb, p_id, v_job.status, array_to_string(p_from, ', ')
      using errcode = 'SB409';
  end if;
  return v_job;
end $function$
;
