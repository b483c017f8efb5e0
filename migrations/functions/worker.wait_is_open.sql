CREATE OR REPLACE FUNCTION worker.wait_is_open(p_job worker.jobs, p_wait worker.job_waits, p_now timestamp with time zone)
 RETURNS boolean
 LANGUAGE sql
 STABLE
AS $function$
  -- A wait takes an event while its job is parked at the wait's step: queued, no cancel pending,
  -- its timeout not passed. A job claimed at its timeout (or made due by an operator) is running
  -- the timeout outcome, so an event then is kept for its next wait instead.
  select p_job.status = 'queued' and p_job.cancel_requested_at is null and p_job.step = p_wait.step
     and (p_wait.timeout_at is null or p_wait.timeout_at > p_now)
$function$
;
