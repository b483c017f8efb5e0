CREATE OR REPLACE FUNCTION worker.enqueue_time(e jsonb, p_field text)
 RETURNS timestamp with time zone
 LANGUAGE plpgsql
 STABLE
AS $function$
declare
  v jsonb := e->p_field;
begin
  if v is null or v = 'null'::jsonb then
    return null;
  elsif jsonb_typeof(v) = 'string' then
    begin
      return (v #>> '{}')::timestamptz;
    exception when data_exception then
      null; -- refused below with the field's name
    end;
  end if;
  raise exception '% must be a timestamp (ISO 8601 with an offset), got %', p_field, left(v::text, 100)
    using errcode = 'SB400', column = p_field;
end $function$
;
