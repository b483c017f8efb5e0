CREATE OR REPLACE FUNCTION worker.check_signal_name(p_name text, p_key text)
 RETURNS void
 LANGUAGE plpgsql
 IMMUTABLE
AS $function$
begin
  -- What a wait and a signal name: an event name (what happened) and an optional correlation key
  -- (which one: a cluster id, a build id). Refused with the field, before anything is written.
  if p_name is null or btrim(p_name) = '' or length(p_name) > 200 then
    raise exception 'name must be 1 to 200 characters, not blank' using errcode = 'SB400', column = 'name';
  end if;
  if p_key is not null and (p_key = '' or length(p_key) > 500) then
    raise exception 'key must be 1 to 500 characters when given' using errcode = 'SB400', column = 'key';
  end if;
end $function$
;
