CREATE OR REPLACE FUNCTION worker.prepare_flow_keys(p_job worker.jobs, p_request jsonb, p_rate_limit jsonb, p_fair_key text, OUT job worker.jobs, OUT request jsonb)
 RETURNS record
 LANGUAGE plpgsql
AS $function$
declare
  v_per   jsonb;
  v_ms    bigint;
  v_limit int;
  v_row   worker.rate_limits;
  v_m     text[];
begin
  -- An enqueue's own rate limit and fairness key (0240), over the type's (worker.prepare_enqueue
  -- set those): rateLimit {key, limit, per} and fairnessKey, literal text. A rate key holds one
  -- limit: the first to name it (a type's sync, or an enqueue) creates its row, and an enqueue
  -- naming an existing key with another limit or window is refused (SB409), never applied to the
  -- key's other jobs behind their back. A redeploy whose type declares the key changes it.
  job := p_job;
  request := p_request;
  if p_fair_key is not null then
    if char_length(p_fair_key) not between 1 and 200 or btrim(p_fair_key) = '' then
      raise exception 'fairnessKey must be 1 to 200 characters, not blank' using errcode = 'SB400', column = 'fairnessKey';
    end if;
    job.fair_key := p_fair_key;
    request := request || jsonb_build_object('fairnessKey', p_fair_key);
  end if;
  if p_rate_limit is null or p_rate_limit = 'null'::jsonb then
    return;
  end if;
  if jsonb_typeof(p_rate_limit) <> 'object' or exists (select 1 from jsonb_object_keys(p_rate_limit) k where k not in ('key', 'limit', 'per')) then
    raise exception 'rateLimit must be an object {key, limit, per}, got %', left(p_rate_limit::text, 100)
      using errcode = 'SB400', column = 'rateLimit';
  end if;
  if jsonb_typeof(p_rate_limit->'key') is distinct from 'string' or char_length(p_rate_limit->>'key') not between 1 and 200
     or p_rate_limit->>'key' ~ '[{}]' then
    raise exception 'rateLimit.key must be 1 to 200 characters of literal text (no {field}), got %', left(coalesce(p_rate_limit->'key', 'null'::jsonb)::text, 100)
      using errcode = 'SB400', column = 'rateLimit.key';
  end if;
  if jsonb_typeof(p_rate_limit->'limit') is distinct from 'number' or (p_rate_limit->'limit')::numeric <> trunc((p_rate_limit->'limit')::numeric)
     or (p_rate_limit->'limit')::numeric not between 1 and 100000 then
    raise exception 'rateLimit.limit must be an integer from 1 to 100000, got %', left(coalesce(p_rate_limit->'limit', 'null'::jsonb)::text, 100)
      using errcode = 'SB400', column = 'rateLimit.limit';
  end if;
  v_limit := (p_rate_limit->'limit')::numeric::int;
  -- the window as flow-types.ts's rateWindowMs reads it: '30s', '1m', '1h', '1d', '500ms' or milliseconds
  v_per := p_rate_limit->'per';
  if jsonb_typeof(v_per) = 'number' and (v_per)::numeric = trunc((v_per)::numeric) and abs((v_per)::numeric) < 1e15 then
    v_ms := (v_per)::numeric::bigint;
  elsif jsonb_typeof(v_per) = 'string' then
    v_m := regexp_match(v_per #>> '{}', '^(\d{1,12})(ms|s|m|h|d)$');
    if v_m is not null then
      v_ms := v_m[1]::bigint * case v_m[2] when 'ms' then 1 when 's' then 1000 when 'm' then 60000 when 'h' then 3600000 else 86400000 end;
    end if;
  end if;
  if v_ms is null or v_ms not between 1000 and 604800000 then
    raise exception 'rateLimit.per must be 1 s to 7 days (''10s'', ''1m'', ''1h'', ''1d'' or milliseconds), got %', left(coalesce(v_per, 'null'::jsonb)::text, 100)
      using errcode = 'SB400', column = 'rateLimit.per';
  end if;
  -- A key another transaction is creating: the insert waits for it, and the select after it
  -- reads the committed row, so two enqueues naming one new key with different limits cannot
  -- both win.
  insert into worker.rate_limits (key, max_starts, per_ms) values (p_rate_limit->>'key', v_limit, v_ms) on conflict do nothing;
  select * into v_row from worker.rate_limits r where r.key = p_rate_limit->>'key';
  if v_row.max_starts <> v_limit or v_row.per_ms <> v_ms then
    raise exception 'rateLimit: rate key "%" is limited to % per % ms, not % per % ms: a key has one limit (name another key, or the same limit)',
      v_row.key, v_row.max_starts, v_row.per_ms, v_limit, v_ms using errcode = 'SB409', column = 'rateLimit';
  end if;
  job.rate_key := v_row.key;
  request := request || jsonb_build_object('rateLimit', jsonb_build_object('key', v_row.key, 'limit', v_limit, 'perMs', v_ms));
end $function$
;
