CREATE OR REPLACE FUNCTION worker.normalize_error(p_error text)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
  -- A failure's message with what differs between two jobs failing the same way replaced
  -- (quoted values first, so an id inside quotes is one value; then ids, times, hex, numbers),
  -- whitespace collapsed, the first 2000 characters read and 500 kept: jobs that failed alike
  -- share the result, and worker.error_fingerprint hashes it. A null error is ''.
  select left(btrim(regexp_replace(
    regexp_replace(regexp_replace(regexp_replace(regexp_replace(regexp_replace(
      left(coalesce(p_error, ''), 2000),
      $re$'[^']*'|"[^"]*"|`[^`]*`$re$, '<value>', 'g'),
      '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}', '<id>', 'gi'),
      '\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}(:?\d{2})?)?)?', '<time>', 'gi'),
      '\m(0x[0-9a-f]+|(?=[a-f]*[0-9])[0-9a-f]{8,})\M', '<hex>', 'gi'),
      '\m\d+(\.\d+)?\M', '<n>', 'g'),
    '\s+', ' ', 'g')), 500)
$function$
;
