CREATE OR REPLACE FUNCTION worker.error_fingerprint(p_error text)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
  -- 16 hex digits naming how a job failed: the hash of its normalised last_error
  -- (worker.normalize_error), what the dead-letter view groups by and a bulk filter matches.
  -- (worker.dead_letters hashes the normalised text it groups by the same way)
  select left(md5(worker.normalize_error(p_error)), 16)
$function$
;
