CREATE OR REPLACE FUNCTION worker.release_job_lease(p_id uuid, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS worker.jobs
 LANGUAGE plpgsql
AS $function$
declare
  v_now timestamptz := coalesce(p_now, now());
  v_was worker.jobs;
  v_job worker.jobs;
begin
  -- Take a running job's lease from its owner: claimable at once; the owner's fenced settle and
  -- heartbeat match nothing (its heartbeat aborts the step). The try counts as a failure.
  v_was := worker.lock_job_for(p_id, 'release the lease of', '{running}');
  update worker.jobs set status = 'queued', run_at = v_now, locked_until = null, running_pool = null, lease_token = null
   where id = p_id returning * into v_job;
  insert into worker.job_events (job_id, at, kind, detail)
  values (p_id, v_now, 'lease_released', jsonb_build_object('owner', v_was.locked_by, 'manual', true));
  return v_job;
end $function$
;
