CREATE OR REPLACE FUNCTION worker.settle_rate_limited(p_id uuid, p_token uuid, p_retry_after_ms bigint, p_error text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS text
 LANGUAGE plpgsql
AS $function$
-- A step of a rate-limited job was refused by its provider (a 429 with Retry-After): pause the
-- job's rate key until then and queue the job for that moment, its attempt unspent (the step did
-- not fail; the provider was busy). Answers 'paused'; 'no_key' for a job without a rate key
-- (nothing changed: the caller retries it as any error); 'lost' when the lease is not held.
declare
  v_now   timestamptz := coalesce(p_now, now());
  v_key   text;
  v_until timestamptz;
begin
  if p_retry_after_ms is null or p_retry_after_ms < 0 or p_retry_after_ms > 86400000 then
    raise exception 'retry_after_ms must be from 0 to 86400000 (a day), got %', p_retry_after_ms
      using errcode = 'SB400', column = 'retryAfterMs';
  end if;
  select j.rate_key into v_key from worker.jobs j
   where j.id = p_id and j.lease_token = p_token and j.status = 'running' for update;
  if not found then return 'lost'; end if;
  if v_key is null then return 'no_key'; end if;
  -- A later Retry-After never shortens a pause another step of the key set.
  update worker.rate_limits r
     set paused_until = greatest(r.paused_until, v_now + make_interval(secs => p_retry_after_ms / 1000.0)),
         pause_reason = left(p_error, 500), updated_at = v_now
   where r.key = v_key
  returning r.paused_until into v_until;
  v_until := coalesce(v_until, v_now + make_interval(secs => p_retry_after_ms / 1000.0));
  update worker.jobs j
     set status = 'queued', attempts = greatest(j.attempts - 1, 0), locked_until = null, running_pool = null, run_at = v_until
   where j.id = p_id;
  insert into worker.job_events (job_id, at, kind, detail)
  values (p_id, v_now, 'lease_released',
          jsonb_build_object('reason', 'rate limited: ' || left(p_error, 500), 'rateKey', v_key, 'until', v_until));
  return 'paused';
end $function$
;
