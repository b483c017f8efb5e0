CREATE OR REPLACE FUNCTION worker.concurrency_key_pattern(p_template text)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
  select regexp_replace(replace(replace(replace(p_template, '\', '\\'), '%', '\%'), '_', '\_'),
                        '\{[A-Za-z\\_][A-Za-z0-9\\_]*\}', '%', 'g')
$function$
;
