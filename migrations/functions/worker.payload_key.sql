CREATE OR REPLACE FUNCTION worker.payload_key(p_template text, p_payload jsonb, p_what text)
 RETURNS text
 LANGUAGE plpgsql
 IMMUTABLE PARALLEL SAFE
AS $function$
declare
  v_key  text := '';
  v_part text[];
  v      jsonb;
begin
  -- A key a job type derives from its payload: the template's literal text with each {field}
  -- replaced by the payload's value. p_what names the key in the refusal (a concurrency key, a
  -- fairness key), so the caller learns which of the type's declarations needs the field.
  for v_part in select m from regexp_matches(p_template, '([^{}]+)|\{([A-Za-z_][A-Za-z0-9_]*)\}', 'g') m loop
    if v_part[1] is not null then
      v_key := v_key || v_part[1];
    else
      v := p_payload->v_part[2];
      if v is null or jsonb_typeof(v) not in ('string', 'number') or v #>> '{}' = '' then
        raise exception 'payload.% must be a non-empty string: it makes this job''s % (%)', v_part[2], p_what, p_template
          using errcode = 'SB400', column = 'payload.' || v_part[2];
      end if;
      v_key := v_key || (v #>> '{}');
    end if;
  end loop;
  return v_key;
end $function$
;
