CREATE OR REPLACE FUNCTION worker.payload_value_error(s jsonb, v jsonb)
 RETURNS text
 LANGUAGE plpgsql
 IMMUTABLE PARALLEL SAFE
AS $function$
declare
  k text := jsonb_typeof(v);
  t jsonb := case jsonb_typeof(s->'type') when 'string' then jsonb_build_array(s->'type') when 'array' then s->'type' end;
  -- beyond a double's range JSON.parse gives Infinity: zod's business, not ours
  n float8 := case when k = 'number' and abs(v::numeric) < 1e300 then v::numeric::float8 end;
begin
  if t is not null and not (t ? k or (t ? 'integer' and k = 'number' and (n is null or n = trunc(n)))) then
    return 'must be of type ' || (select string_agg(x, ' or ') from jsonb_array_elements_text(t) x) || ', got '
      || case when k = 'number' and t ? 'integer' then 'a number with a fraction' else k end;
  end if;
  return case
    when jsonb_typeof(s->'enum') = 'array' and not s->'enum' @> jsonb_build_array(v) then
      'must be one of ' || (s->'enum')::text || ', got ' || left(v::text, 100)
    when s ? 'const' and s->'const' <> v then 'must be ' || (s->'const')::text || ', got ' || left(v::text, 100)
    when k = 'string' and jsonb_typeof(s->'maxLength') = 'number' and char_length(v #>> '{}') > (s->>'maxLength')::numeric then
      'must be at most ' || (s->>'maxLength') || ' characters, got ' || char_length(v #>> '{}')
    when k = 'string' and jsonb_typeof(s->'minLength') = 'number' and char_length(v #>> '{}') < (s->>'minLength')::numeric
         -- zod counts UTF-16 units: a code point outside the BMP is two
         and char_length(v #>> '{}') + char_length(regexp_replace(v #>> '{}', '[^\U00010000-\U0010FFFF]', '', 'g')) < (s->>'minLength')::numeric then
      'must be at least ' || (s->>'minLength') || ' characters, got ' || char_length(v #>> '{}')
    when n is not null and jsonb_typeof(s->'minimum') = 'number' and n < (s->>'minimum')::float8 then
      'must be at least ' || (s->>'minimum') || ', got ' || v::text
    when n is not null and jsonb_typeof(s->'maximum') = 'number' and n > (s->>'maximum')::float8 then
      'must be at most ' || (s->>'maximum') || ', got ' || v::text
    when n is not null and jsonb_typeof(s->'exclusiveMinimum') = 'number' and n <= (s->>'exclusiveMinimum')::float8 then
      'must be greater than ' || (s->>'exclusiveMinimum') || ', got ' || v::text
    when n is not null and jsonb_typeof(s->'exclusiveMaximum') = 'number' and n >= (s->>'exclusiveMaximum')::float8 then
      'must be less than ' || (s->>'exclusiveMaximum') || ', got ' || v::text
  end;
end $function$
;
