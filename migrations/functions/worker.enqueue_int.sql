CREATE OR REPLACE FUNCTION worker.enqueue_int(e jsonb, p_field text, p_min numeric, p_max numeric)
 RETURNS numeric
 LANGUAGE plpgsql
 IMMUTABLE
AS $function$
declare
  v jsonb := e->p_field;
  n numeric;
begin
  if v is null or v = 'null'::jsonb then
    return null;
  elsif jsonb_typeof(v) = 'number' then
    n := v::numeric;
  elsif jsonb_typeof(v) = 'string' and v #>> '{}' ~ '^\s*[+-]?[0-9]{1,30}\s*$' then
    n := (v #>> '{}')::numeric;
  end if;
  if n is null or n <> trunc(n) then
    raise exception '% must be an integer, got %', p_field, left(v::text, 100) using errcode = 'SB400', column = p_field;
  end if;
  if n not between p_min and p_max then
    raise exception '% must be an integer from % to %, got %', p_field, p_min, p_max, n using errcode = 'SB400', column = p_field;
  end if;
  return n;
end $function$
;
