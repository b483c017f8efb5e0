CREATE OR REPLACE FUNCTION worker.type_concurrency_key(p_template text, p_payload jsonb)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
  -- kept for SQL written against 0120; the engine calls worker.payload_key itself
  select worker.payload_key(p_template, p_payload, 'concurrency key')
$function$
;
