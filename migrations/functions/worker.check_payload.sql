CREATE OR REPLACE FUNCTION worker.check_payload(p_schema jsonb, p_value jsonb, p_path text)
 RETURNS void
 LANGUAGE plpgsql
 IMMUTABLE PARALLEL SAFE
AS $function$
declare
  v_error text := worker.payload_value_error(p_schema, p_value);
  v_props jsonb := p_schema->'properties';
  v_key   text;
  v_sub   jsonb;
begin
  if v_error is not null then
    raise exception '% %', p_path, v_error using errcode = 'SB400', column = p_path;
  end if;
  if jsonb_typeof(p_value) <> 'object' then
    return;
  end if;
  if jsonb_typeof(p_schema->'required') = 'array'
     and not p_schema->'required' <@ jsonb_path_query_array(p_value, '$.keyvalue().key') then
    select r into v_key from jsonb_array_elements_text(p_schema->'required') r where not p_value ? r limit 1;
    raise exception '%.% is required', p_path, v_key using errcode = 'SB400', column = p_path || '.' || v_key;
  end if;
  if p_schema->'additionalProperties' = 'false'::jsonb and not p_schema ? 'patternProperties'
     and not jsonb_path_query_array(p_value, '$.keyvalue().key') <@ jsonb_path_query_array(coalesce(v_props, '{}'), '$.keyvalue().key') then
    select k into v_key from jsonb_object_keys(p_value) k where not coalesce(v_props ? k, false) limit 1;
    raise exception '%.% is not a field of this payload (allowed: %)', p_path, v_key,
      coalesce((select string_agg(k, ', ' order by k) from jsonb_object_keys(v_props) k), 'none')
      using errcode = 'SB400', column = p_path || '.' || v_key;
  end if;
  if jsonb_typeof(v_props) = 'object' then
    for v_key, v_sub in select key, value from jsonb_each(v_props) loop
      continue when not p_value ? v_key or jsonb_typeof(v_sub) <> 'object';
      if jsonb_typeof(p_value->v_key) = 'object' then
        perform worker.check_payload(v_sub, p_value->v_key, p_path || '.' || v_key);
      else
        v_error := worker.payload_value_error(v_sub, p_value->v_key);
        if v_error is not null then
          raise exception '%.% %', p_path, v_key, v_error using errcode = 'SB400', column = p_path || '.' || v_key;
        end if;
      end if;
    end loop;
  end if;
end $function$
;
