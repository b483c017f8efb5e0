CREATE OR REPLACE FUNCTION worker.resume_rate_key(p_key text, p_resumed_by text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone, OUT key text, OUT paused_until timestamp with time zone, OUT pause_reason text, OUT jobs_due integer)
 RETURNS record
 LANGUAGE plpgsql
AS $function$
-- End a rate key's pause now (an operator who knows the provider is back, or that its
-- Retry-After was wrong): claims take the key's jobs again at once, within its limit. The jobs a
-- 429 queued for the pause's end (worker.settle_rate_limited) become due now, each with a
-- `resumed` event naming the key and who resumed it. Answers the pause it ended and how many jobs
-- it made due. SB400 a blank key or resumedBy, SB404 an unknown key, SB409 a key not paused.
declare
  v_now timestamptz := coalesce(p_now, now());
  v_row worker.rate_limits;
begin
  if p_key is null or btrim(p_key) = '' then
    raise exception 'key must be a rate key, got %', coalesce(p_key, 'null') using errcode = 'SB400', column = 'key';
  end if;
  if p_resumed_by is null or btrim(p_resumed_by) = '' or char_length(p_resumed_by) > 200 then
    raise exception 'resumedBy must be 1 to 200 characters, not blank' using errcode = 'SB400', column = 'resumedBy';
  end if;
  -- the row lock: a claim takes it with SKIP LOCKED, a 429's settle waits for it
  select * into v_row from worker.rate_limits r where r.key = p_key for update;
  if not found then
    raise exception 'rate key "%" does not exist', left(p_key, 200) using errcode = 'SB404', column = 'key';
  end if;
  if v_row.paused_until is null or v_row.paused_until <= v_now then
    raise exception 'rate key "%" is not paused', p_key using errcode = 'SB409', column = 'key';
  end if;
  update worker.rate_limits r set paused_until = null, pause_reason = null, updated_at = v_now where r.key = p_key;
  -- The jobs the pause holds: queued by a 429 of this key for a moment not yet come, no later
  -- than the pause's end (a job an operator rescheduled past it keeps its time).
  with held as (
    update worker.jobs j set run_at = v_now
     where j.rate_key = p_key and j.status = 'queued' and j.run_at > v_now and j.run_at <= v_row.paused_until
       and exists (select 1 from worker.job_events e
                    where e.job_id = j.id and e.kind = 'lease_released' and e.detail->>'rateKey' = p_key
                      and (e.detail->>'until')::timestamptz = j.run_at)
    returning j.id
  ), ev as (
    insert into worker.job_events (job_id, at, kind, detail)
    select h.id, v_now, 'resumed', jsonb_build_object('rateKey', p_key, 'by', p_resumed_by, 'pausedUntil', v_row.paused_until)
      from held h
  )
  select count(*)::int into jobs_due from held;
  key := v_row.key;
  paused_until := v_row.paused_until;
  pause_reason := v_row.pause_reason;
end $function$
;
