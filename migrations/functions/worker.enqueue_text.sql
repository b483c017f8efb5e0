CREATE OR REPLACE FUNCTION worker.enqueue_text(e jsonb, p_field text)
 RETURNS text
 LANGUAGE plpgsql
 IMMUTABLE
AS $function$
declare
  v jsonb := e->p_field;
begin
  if v is null or v = 'null'::jsonb then
    return null;
  elsif jsonb_typeof(v) not in ('string', 'number') then
    raise exception '% must be a string, got %', p_field, jsonb_typeof(v) using errcode = 'SB400', column = p_field;
  end if;
  return v #>> '{}';
end $function$
;
