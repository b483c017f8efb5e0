CREATE OR REPLACE FUNCTION worker.job_filter_of(p_filter jsonb, p_op text)
 RETURNS worker.job_filter
 LANGUAGE plpgsql
 STABLE
AS $function$
declare
  v_allowed text[] := case p_op when 'requeue' then '{failed,cancelled,oom_killed}'::text[]
                                when 'cancel' then '{queued,running}'::text[] end;
  v_f       worker.job_filter;
  v_key     text;
  v_field   text;
begin
  -- The JSON filter of a bulk operation ({type, status, createdAfter, createdBefore,
  -- finishedAfter, finishedBefore, fingerprint, all}) as a worker.job_filter, or SB400 naming
  -- the field. No criterion at all is refused unless "all": true says that is meant.
  if v_allowed is null then
    raise exception 'unknown bulk operation "%"', p_op using errcode = 'SB400', column = 'op';
  end if;
  if p_filter is null or jsonb_typeof(p_filter) <> 'object' then
    raise exception 'filter must be a JSON object' using errcode = 'SB400', column = 'filter';
  end if;
  select k into v_key from jsonb_object_keys(p_filter) k
   where k not in ('type', 'status', 'createdAfter', 'createdBefore', 'finishedAfter', 'finishedBefore', 'fingerprint', 'all')
   limit 1;
  if v_key is not null then
    raise exception 'filter.% is not a filter field (allowed: all, createdAfter, createdBefore, finishedAfter, finishedBefore, fingerprint, status, type)', v_key
      using errcode = 'SB400', column = 'filter.' || v_key;
  end if;
  if p_filter ? 'all' and p_filter->'all' is distinct from 'true'::jsonb then
    raise exception 'filter.all must be true when given' using errcode = 'SB400', column = 'filter.all';
  end if;
  if not exists (select 1 from jsonb_object_keys(p_filter) k where k <> 'all') and p_filter->'all' is distinct from 'true'::jsonb then
    raise exception 'an empty filter would % every job it may: name a type, status, time range or fingerprint, or give "all": true', p_op
      using errcode = 'SB400', column = 'filter';
  end if;
  v_f.op := p_op;

  if p_filter ? 'type' then
    if jsonb_typeof(p_filter->'type') <> 'string' or not exists (select 1 from worker.job_types t where t.type = p_filter->>'type') then
      raise exception 'filter.type: unknown job type %', p_filter->'type' using errcode = 'SB400', column = 'filter.type';
    end if;
    v_f.type := p_filter->>'type';
  end if;

  if p_filter ? 'status' then
    if jsonb_typeof(p_filter->'status') = 'string' then
      v_f.statuses := array[p_filter->>'status'];
    elsif jsonb_typeof(p_filter->'status') = 'array' and jsonb_array_length(p_filter->'status') > 0
          and not exists (select 1 from jsonb_array_elements(p_filter->'status') e where jsonb_typeof(e) <> 'string') then
      v_f.statuses := array(select distinct e from jsonb_array_elements_text(p_filter->'status') e order by 1);
    else
      raise exception 'filter.status must be a status or a non-empty array of them' using errcode = 'SB400', column = 'filter.status';
    end if;
    if not v_f.statuses <@ v_allowed then
      raise exception 'filter.status: % takes jobs that are %, not %', p_op, array_to_string(v_allowed, ', '),
        array_to_string(array(select s from unnest(v_f.statuses) s where s <> all (v_allowed)), ', ')
        using errcode = 'SB400', column = 'filter.status';
    end if;
  else
    v_f.statuses := v_allowed;
  end if;

  foreach v_field in array array['createdAfter', 'createdBefore', 'finishedAfter', 'finishedBefore'] loop
    continue when not p_filter ? v_field;
    if p_op = 'cancel' and v_field like 'finished%' then
      raise exception 'filter.%: the jobs cancel takes have not finished', v_field using errcode = 'SB400', column = 'filter.' || v_field;
    end if;
    begin
      if jsonb_typeof(p_filter->v_field) <> 'string' then
        raise exception using errcode = '22007';
      end if;
      case v_field
        when 'createdAfter' then v_f.created_after := (p_filter->>v_field)::timestamptz;
        when 'createdBefore' then v_f.created_before := (p_filter->>v_field)::timestamptz;
        when 'finishedAfter' then v_f.finished_after := (p_filter->>v_field)::timestamptz;
        else v_f.finished_before := (p_filter->>v_field)::timestamptz;
      end case;
    exception when invalid_datetime_format or datetime_field_overflow then
      raise exception 'filter.% must be a time (ISO 8601, e.g. 2026-05-01T00:00:00Z), got %', v_field, p_filter->v_field
        using errcode = 'SB400', column = 'filter.' || v_field;
    end;
  end loop;

  if p_filter ? 'fingerprint' then
    if jsonb_typeof(p_filter->'fingerprint') <> 'string' or p_filter->>'fingerprint' !~ '^[0-9a-f]{16}$' then
      raise exception 'filter.fingerprint must be 16 hex digits, as the dead-letter view shows, got %', p_filter->'fingerprint'
        using errcode = 'SB400', column = 'filter.fingerprint';
    end if;
    v_f.fingerprint := p_filter->>'fingerprint';
  end if;
  return v_f;
end $function$
;
