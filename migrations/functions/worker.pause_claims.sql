CREATE OR REPLACE FUNCTION worker.pause_claims(p_kind text, p_name text, p_paused_by text, p_reason text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS worker.pauses
 LANGUAGE plpgsql
AS $function$
-- Pause a job type or a pool: claims skip it from the next claim on; nothing else changes.
declare
  v_row worker.pauses;
begin
  if p_kind is null or p_kind not in ('type', 'pool') then
    raise exception 'kind must be ''type'' or ''pool'', got %', coalesce(p_kind, 'null') using errcode = 'SB400', column = 'kind';
  end if;
  if p_name is null or char_length(p_name) not between 1 and 200 then
    raise exception 'name must be 1 to 200 characters' using errcode = 'SB400', column = 'name';
  end if;
  if p_kind = 'type' and not exists (select 1 from worker.job_types t where t.type = p_name) then
    raise exception 'unknown job type "%"', p_name using errcode = 'SB404', column = 'name';
  end if;
  -- A pool is defined by its capacity row or by a job that names it (any retained job: the
  -- first probe is the key, the second stops at the first row, and only a refusal reads the
  -- whole table, on an operator's action). A pool already paused is left to the 409 below.
  -- Without this a typo ('eu-wset') paused nothing and said it had.
  if p_kind = 'pool'
     and not exists (select 1 from worker.pool_capacity c where c.pool = p_name)
     and not exists (select 1 from worker.pauses p where p.kind = 'pool' and p.name = p_name)
     and not exists (select 1 from worker.jobs j where j.pool = p_name) then
    raise exception 'unknown pool "%": no worker.pool_capacity row and no job names it', p_name using errcode = 'SB404', column = 'name';
  end if;
  if p_paused_by is null or char_length(p_paused_by) not between 1 and 200 then
    raise exception 'pausedBy must be 1 to 200 characters' using errcode = 'SB400', column = 'pausedBy';
  end if;
  if p_reason is null or char_length(btrim(p_reason)) not between 1 and 500 then
    raise exception 'reason must be 1 to 500 characters' using errcode = 'SB400', column = 'reason';
  end if;
  insert into worker.pauses (kind, name, paused_by, paused_at, reason)
  values (p_kind, p_name, p_paused_by, coalesce(p_now, now()), btrim(p_reason))
  on conflict do nothing
  returning * into v_row;
  if not found then
    select * into v_row from worker.pauses p where p.kind = p_kind and p.name = p_name;
    raise exception '% "%" is already paused (by %, at %: %)', p_kind, p_name, v_row.paused_by, v_row.paused_at, v_row.reason
      using errcode = 'SB409', column = 'name';
  end if;
  return v_row;
end $function$
;
