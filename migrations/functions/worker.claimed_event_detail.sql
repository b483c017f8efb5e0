CREATE OR REPLACE FUNCTION worker.claimed_event_detail(p_owner text, p_token uuid, p_attempt integer, p_step text, p_claimed_at timestamp with time zone, p_type text)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
AS $function$
  select jsonb_build_object('owner', p_owner, 'token', p_token, 'attempt', p_attempt, 'step', p_step,
           'lockedUntil', p_claimed_at + make_interval(secs => t.lease_ms / 1000.0))
    from worker.job_types t where t.type = p_type
$function$
;
