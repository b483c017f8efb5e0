CREATE OR REPLACE FUNCTION worker.resume_job(p_id uuid, p_expect_step text DEFAULT NULL::text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS worker.jobs
 LANGUAGE plpgsql
AS $function$
declare
  v_now timestamptz := coalesce(p_now, now());
  v_was worker.jobs;
  v_job worker.jobs;
begin
  -- Resume a job parked at a step (queued, run_at infinity) so it runs now. With p_expect_step, a
  -- job at another step is a conflict (a cluster that is not awaiting bootstrap).
  v_was := worker.lock_job_for(p_id, 'resume', '{queued}');
  if p_expect_step is not null and v_was.step is distinct from p_expect_step then
    raise exception 'cannot resume job %: it is at step %, not %', p_id, v_was.step, p_expect_step using errcode = 'SB409';
  end if;
  update worker.jobs set run_at = v_now where id = p_id returning * into v_job;
  insert into worker.job_events (job_id, at, kind, detail) values (p_id, v_now, 'resumed', jsonb_build_object('step', v_was.step));
  return v_job;
end $function$
;
