-- Enqueue keeps its promises off the paths the suite walked (issue 13, bugs 1, 3, 4 and 8):
--
-- 1. submit_key + dedupe_key: a session that found no job for its submit key superseded the
--    key's waiting job, then lost the submit key to a concurrent session and returned that
--    session's job as the duplicate -- the very job it had just cancelled (superseded_by naming
--    a job that never existed, no live job for the key). Now the submit key is reserved before
--    any supersede (worker.submit_keys, enqueue_prepared).
-- 4. The submit-key comparison read the original request from the job's `enqueued` event, which
--    event retention prunes while the job is still queued or parked: an identical resubmit
--    became a 409. The request's identity now lives with the job's key (worker.submit_keys).
-- 3. A job pinned to a pool whose max_running_weight is below its weight class's cost could never
--    be claimed; enqueue accepted it. Now refused.
-- 8. The batch without keys had its own validation (it accepted a negative delayMs), malformed
--    batch values surfaced as raw casts (22P02, 22007, 22008), and payloads were not checked
--    against the type's schema at all. Now every path parses and validates through one function
--    (prepare_enqueue) and checks the payload against the JSON Schema the runner's registry
--    stores with the type (job_types.payload_schema).

-- Submit keys are reserved in a table of their own, one row per key, holding the job that has the
-- key and what that job was asked for beside its payload (which the job keeps unchanged):
-- {type, priority, maxAttempts, dedupeKey, pool, weight, concurrencyKey, concurrencyLimit} as
-- given. Enqueue inserts the row first (enqueue_prepared): a unique insert, so a concurrent
-- submit of the same key waits for the holder's transaction and then finds its job. Only jobs
-- with a submit key have a row; keyless jobs store and pay nothing. Beside worker.jobs rather
-- than a column of it: the claim hands runners every column of a job (0062), and this is no
-- business of a runner's.
create table worker.submit_keys (
  submit_key  text primary key,
  job_id      uuid not null,
  -- null: a job enqueued before 0070 whose enqueued event was already pruned
  request     jsonb
);

-- A key goes with its job when the job is pruned, and can then be used again. Only rows with a
-- submit key fire it; claims and settles are updates and are not touched.
create function worker.release_submit_key() returns trigger language plpgsql as $$
begin
  delete from worker.submit_keys k where k.submit_key = old.submit_key and k.job_id = old.id;
  return null;
end $$;
create trigger jobs_release_submit_key after delete on worker.jobs
  for each row when (old.submit_key is not null) execute function worker.release_submit_key();

-- Every job with a submit key gets its row, with its identity from its enqueued event while that
-- event still exists. A job whose event was pruned before this migration gets none and is
-- compared on the fields the row holds exactly as given (type, payload, dedupe key, pool,
-- concurrency key and limit).
insert into worker.submit_keys (submit_key, job_id, request)
select j.submit_key, j.id,
       (select (e.detail->'request') - 'payload' from worker.job_events e
         where e.job_id = j.id and e.kind = 'enqueued' and e.detail ? 'request' order by e.id limit 1)
  from worker.jobs j
 where j.submit_key is not null;

-- The JSON Schema of the type's payload, generated from its zod schema by the registry sync
-- (queue/registry.ts); null (no check) for a type no runner has synced.
alter table worker.job_types add column payload_schema jsonb
  check (payload_schema is null or jsonb_typeof(payload_schema) = 'object');

-- Checks a payload against the subset of JSON Schema that zod's generator writes for the types
-- (type, properties, required, additionalProperties: false, enum, const, minLength/maxLength,
-- minimum/maximum and their exclusive forms), raising SB400 with COLUMN the value's path
-- (payload.text). It is a pre-check: the runner still parses with zod. So it must never refuse
-- what zod accepts: every other keyword (anyOf, pattern, format, items, $ref, …) passes, numbers
-- are compared as the doubles JavaScript will read, and a length in the unit that cannot
-- overstate it (code points for a maximum; for a minimum UTF-16 units, zod's unit). The checks
-- are plain expressions (no query) except the walk over an object's properties.

-- What is wrong with value `v` under schema `s`, not looking inside objects; null if nothing.
create function worker.payload_value_error(s jsonb, v jsonb) returns text
language plpgsql immutable parallel safe as $$
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
end $$;

create function worker.check_payload(p_schema jsonb, p_value jsonb, p_path text)
returns void language plpgsql immutable parallel safe as $$
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
end $$;

-- The one validation of an enqueue request (single, batch with keys, batch without): raises SB400
-- with COLUMN naming the field, or returns the row to insert (`job`: id, defaults from the type,
-- run_at) and the request's identity (`request`). Writes nothing.
drop function worker.validate_enqueue(text, jsonb, int, int, text, text, text, text, text, int);
create function worker.prepare_enqueue(
  p_type text, p_payload jsonb, p_priority int, p_run_at timestamptz, p_max_attempts int, p_dedupe_key text,
  p_submit_key text, p_pool text, p_weight text, p_concurrency_key text, p_concurrency_limit int,
  p_delay_ms bigint, p_now timestamptz, out job worker.jobs, out request jsonb
) language plpgsql volatile as $$
declare
  v_type   worker.job_types;
  v_job    worker.jobs;
  v_cost   int;
  v_max    int;
begin
  p_priority := coalesce(p_priority, 50);
  p_payload := coalesce(p_payload, '{}'::jsonb);
  select * into v_type from worker.job_types t where t.type = p_type;
  if not found then
    raise exception 'unknown job type "%"', coalesce(p_type, '(null)') using errcode = 'SB400', column = 'type';
  end if;
  if jsonb_typeof(p_payload) <> 'object' then
    raise exception 'payload must be a JSON object, got %', jsonb_typeof(p_payload)
      using errcode = 'SB400', column = 'payload';
  end if;
  if p_priority not between 0 and 1000 then
    raise exception 'priority must be an integer from 0 to 1000 (10 urgent, 50 normal, 100 low), got %', p_priority
      using errcode = 'SB400', column = 'priority';
  end if;
  if p_max_attempts is not null and p_max_attempts < 1 then
    raise exception 'max_attempts must be at least 1, got %', p_max_attempts using errcode = 'SB400', column = 'maxAttempts';
  end if;
  if p_weight is not null and not exists (select 1 from worker.weight_classes w where w.name = p_weight) then
    raise exception 'unknown weight class "%"', p_weight using errcode = 'SB400', column = 'weight';
  end if;
  if length(p_dedupe_key) > 200 or p_dedupe_key = '' then
    raise exception 'dedupe_key must be 1 to 200 characters' using errcode = 'SB400', column = 'dedupeKey';
  end if;
  if length(p_submit_key) > 200 or p_submit_key = '' then
    raise exception 'submit_key must be 1 to 200 characters' using errcode = 'SB400', column = 'submitKey';
  end if;
  if length(p_pool) > 100 or p_pool = '' then
    raise exception 'pool must be 1 to 100 characters' using errcode = 'SB400', column = 'pool';
  end if;
  if (p_concurrency_key is null) <> (p_concurrency_limit is null) or p_concurrency_limit < 1 then
    raise exception 'concurrency_key and concurrency_limit (>= 1) go together' using errcode = 'SB400', column = 'concurrencyKey';
  end if;
  if p_delay_ms < 0 then
    raise exception 'delayMs must not be negative, got %', p_delay_ms using errcode = 'SB400', column = 'delayMs';
  end if;
  -- a century: beyond it the time overflows long before anyone waits for it (use run_at 'infinity' to park)
  if p_delay_ms > 3155760000000 then
    raise exception 'delayMs must be at most 3155760000000 (100 years), got %', p_delay_ms using errcode = 'SB400', column = 'delayMs';
  end if;
  v_job.weight := coalesce(p_weight, v_type.weight);
  -- A pinned job runs only in its pool: if one job of its class costs more than the pool may
  -- ever run at once, no claim can take it and it would wait forever. (An unpinned job can run
  -- in any pool; a pool without a capacity row has no weight limit.)
  if p_pool is not null then
    select pc.max_running_weight, w.cost into v_max, v_cost
      from worker.pool_capacity pc, worker.weight_classes w
     where pc.pool = p_pool and w.name = v_job.weight;
    if v_cost > v_max then
      raise exception 'weight "%" costs %, more than pool "%" can ever run (max_running_weight %): no claim could take this job',
        v_job.weight, v_cost, p_pool, v_max using errcode = 'SB400', column = 'weight';
    end if;
  end if;
  if v_type.payload_schema is not null then
    perform worker.check_payload(v_type.payload_schema, p_payload, 'payload');
  end if;

  v_job.id := worker.uuidv7();
  v_job.type := p_type;
  v_job.payload := p_payload;
  v_job.priority := p_priority;
  v_job.run_at := coalesce(p_run_at, coalesce(p_now, now()) + make_interval(secs => coalesce(p_delay_ms, 0) / 1000.0));
  v_job.max_attempts := coalesce(p_max_attempts, v_type.max_attempts);
  v_job.dedupe_key := p_dedupe_key;
  v_job.submit_key := p_submit_key;
  v_job.pool := p_pool;
  v_job.concurrency_key := p_concurrency_key;
  v_job.concurrency_limit := p_concurrency_limit;
  v_job.created_at := coalesce(p_now, now());
  job := v_job;
  -- What makes two submissions "the same request", besides the payload (time fields excluded:
  -- a retry is later): the fields as given, not the type's defaults they resolve to. Stored only
  -- for a submit-keyed job (enqueue_prepared); the enqueued event records it with the payload.
  request := jsonb_build_object('type', p_type, 'priority', p_priority,
    'maxAttempts', p_max_attempts, 'dedupeKey', p_dedupe_key, 'pool', p_pool, 'weight', p_weight,
    'concurrencyKey', p_concurrency_key, 'concurrencyLimit', p_concurrency_limit);
end $$;

-- An element of enqueue_jobs (HTTP field names) as typed arguments. A value of the wrong kind is
-- SB400 naming the field, not a failed cast: integers are JSON numbers with no fraction (or
-- strings of digits), runAt a timestamp string, text fields strings (or numbers).
create function worker.enqueue_int(e jsonb, p_field text, p_min numeric, p_max numeric) returns numeric
language plpgsql immutable as $$
declare
  v jsonb := e->p_field;
  n numeric;
begin
  if v is null or v = 'null'::jsonb then
    return null;
  elsif jsonb_typeof(v) = 'number' then
    n := v::numeric;
  elsif jsonb_typeof(v) = 'string' and v #>> '{}' ~ '^\s*[+-]?[0-9]{1,30}\s*$' then
    n := (v #>> '{}')::numeric;
  end if;
  if n is null or n <> trunc(n) then
    raise exception '% must be an integer, got %', p_field, left(v::text, 100) using errcode = 'SB400', column = p_field;
  end if;
  if n not between p_min and p_max then
    raise exception '% must be an integer from % to %, got %', p_field, p_min, p_max, n using errcode = 'SB400', column = p_field;
  end if;
  return n;
end $$;

create function worker.enqueue_text(e jsonb, p_field text) returns text language plpgsql immutable as $$
declare
  v jsonb := e->p_field;
begin
  if v is null or v = 'null'::jsonb then
    return null;
  elsif jsonb_typeof(v) not in ('string', 'number') then
    raise exception '% must be a string, got %', p_field, jsonb_typeof(v) using errcode = 'SB400', column = p_field;
  end if;
  return v #>> '{}';
end $$;

create function worker.enqueue_time(e jsonb, p_field text) returns timestamptz language plpgsql stable as $$
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
end $$;

create function worker.prepare_enqueue_element(e jsonb, p_now timestamptz, out job worker.jobs, out request jsonb)
language plpgsql volatile as $$
declare
  v_p record;
begin
  if jsonb_typeof(e) <> 'object' then
    raise exception 'a job must be a JSON object, got %', jsonb_typeof(e) using errcode = 'SB400', column = '';
  end if;
  -- (a helper only for a field that is there: most elements carry just type and payload)
  select * into v_p from worker.prepare_enqueue(
    worker.enqueue_text(e, 'type'), coalesce(e->'payload', '{}'::jsonb),
    case when e ? 'priority' then worker.enqueue_int(e, 'priority', -2147483648, 2147483647)::int end,
    case when e ? 'runAt' then worker.enqueue_time(e, 'runAt') end,
    case when e ? 'maxAttempts' then worker.enqueue_int(e, 'maxAttempts', -2147483648, 2147483647)::int end,
    case when e ? 'dedupeKey' then worker.enqueue_text(e, 'dedupeKey') end,
    case when e ? 'submitKey' then worker.enqueue_text(e, 'submitKey') end,
    case when e ? 'pool' then worker.enqueue_text(e, 'pool') end,
    case when e ? 'weight' then worker.enqueue_text(e, 'weight') end,
    case when e ? 'concurrencyKey' then worker.enqueue_text(e, 'concurrencyKey') end,
    case when e ? 'concurrencyLimit' then worker.enqueue_int(e, 'concurrencyLimit', -2147483648, 2147483647)::int end,
    case when e ? 'delayMs' then worker.enqueue_int(e, 'delayMs', -9223372036854775808, 9223372036854775807)::bigint end,
    p_now);
  job := v_p.job;
  request := v_p.request;
end $$;

-- Inserts a prepared job (prepare_enqueue), honouring its keys. Returns the job as jsonb plus
-- `_duplicate` (a repeated submit_key) and `_superseded` (the waiting job this one replaced).
create function worker.enqueue_prepared(p_job worker.jobs, p_request jsonb, p_now timestamptz) returns jsonb language plpgsql as $$
declare
  v_row worker.jobs;
  v_key worker.submit_keys;
  v_old uuid;
begin
  -- The claim locks a job's concurrency-key row; creating it with the job means a claim never has
  -- to create one, so it can avoid waiting where a wait could deadlock (0063).
  if p_job.concurrency_key is not null then
    insert into worker.concurrency_keys (key) values (p_job.concurrency_key) on conflict do nothing;
  end if;

  -- Reserve the submit key before superseding anything. The insert waits while another
  -- transaction holds the key uncommitted; once that one commits, the next statement (READ
  -- COMMITTED) sees its row and its job, which is returned (or refused as a different request)
  -- having cancelled nothing. Superseding first let the loser cancel the winner's job in the gap
  -- between its lookup and its insert, and then return that job as the duplicate.
  if p_job.submit_key is not null then
    loop
      insert into worker.submit_keys (submit_key, job_id, request) values (p_job.submit_key, p_job.id, p_request)
      on conflict do nothing;
      exit when found;
      select * into v_key from worker.submit_keys k where k.submit_key = p_job.submit_key;
      if found then
        select * into v_row from worker.jobs j where j.id = v_key.job_id;
        if found then
          if v_row.payload is distinct from p_job.payload
             or (case when v_key.request is not null then v_key.request is distinct from p_request
                      else (v_row.type, v_row.dedupe_key, v_row.pool, v_row.concurrency_key, v_row.concurrency_limit)
                           is distinct from (p_job.type, p_job.dedupe_key, p_job.pool, p_job.concurrency_key, p_job.concurrency_limit) end) then
            raise exception 'submit_key "%" was already used for a different request (job %)', p_job.submit_key, v_row.id
              using errcode = 'SB409', column = 'submitKey';
          end if;
          return to_jsonb(v_row) || jsonb_build_object('_duplicate', true);
        end if;
      end if;
      -- the holder's job was being pruned, and its key with it: go again
    end loop;
  end if;

  loop
    if p_job.submit_key is not null then
      -- A job written around the enqueue functions can hold the key without a row above: it
      -- keeps it (the row is made its own), compared on the fields it holds as given.
      select * into v_row from worker.jobs j where j.submit_key = p_job.submit_key;
      if found then
        update worker.submit_keys k set job_id = v_row.id, request = null where k.submit_key = p_job.submit_key;
        if (v_row.type, v_row.payload, v_row.dedupe_key, v_row.pool, v_row.concurrency_key, v_row.concurrency_limit)
           is distinct from (p_job.type, p_job.payload, p_job.dedupe_key, p_job.pool, p_job.concurrency_key, p_job.concurrency_limit) then
          raise exception 'submit_key "%" was already used for a different request (job %)', p_job.submit_key, v_row.id
            using errcode = 'SB409', column = 'submitKey';
        end if;
        return to_jsonb(v_row) || jsonb_build_object('_duplicate', true);
      end if;
    end if;

    v_old := null;
    if p_job.dedupe_key is not null then
      -- Supersede the waiting (never started) job of this key; an active one is left alone
      -- and the new job waits behind it (the claim skips keys with an active job).
      update worker.jobs j
         set status = 'cancelled', finished_at = p_now, superseded_by = p_job.id,
             last_error = 'superseded by job ' || p_job.id
       where j.dedupe_key = p_job.dedupe_key and j.status = 'queued' and j.started_at is null
      returning j.id into v_old;
      if v_old is not null then
        insert into worker.job_events (job_id, at, kind, detail)
        values (v_old, p_now, 'superseded', jsonb_build_object('by', p_job.id));
      end if;
    end if;

    insert into worker.jobs (id, type, payload, priority, run_at, max_attempts, dedupe_key, submit_key,
                             pool, weight, concurrency_key, concurrency_limit, created_at)
    values (p_job.id, p_job.type, p_job.payload, p_job.priority, p_job.run_at, p_job.max_attempts, p_job.dedupe_key,
            p_job.submit_key, p_job.pool, p_job.weight, p_job.concurrency_key, p_job.concurrency_limit, p_job.created_at)
    on conflict do nothing
    returning * into v_row;
    if found then
      insert into worker.job_events (job_id, at, kind, detail)
      values (p_job.id, p_now, 'enqueued',
              jsonb_build_object('request', p_request || jsonb_build_object('payload', p_job.payload), 'runAt', v_row.run_at)
              || case when v_old is null then '{}'::jsonb else jsonb_build_object('supersedes', v_old) end);
      return to_jsonb(v_row) || jsonb_build_object('_duplicate', false, '_superseded', v_old);
    end if;
    -- A concurrent enqueue took the key's waiting slot first (its submit key is ours): go again,
    -- which supersedes that job.
  end loop;
end $$;

-- The engine's enqueue (signature unchanged). Returns the job as jsonb plus `_duplicate` and
-- `_superseded`, which the public enqueue_job drops.
create or replace function worker.enqueue_job_ex(
  p_type text, p_payload jsonb default '{}'::jsonb, p_priority int default 50, p_run_at timestamptz default null,
  p_max_attempts int default null, p_dedupe_key text default null, p_submit_key text default null,
  p_pool text default null, p_weight text default null, p_concurrency_key text default null,
  p_concurrency_limit int default null, p_delay_ms bigint default null, p_now timestamptz default null
) returns jsonb language plpgsql as $$
declare
  v_now timestamptz := coalesce(p_now, now());
  v_p   record;
begin
  select * into v_p
    from worker.prepare_enqueue(p_type, p_payload, p_priority, p_run_at, p_max_attempts, p_dedupe_key, p_submit_key,
                                p_pool, p_weight, p_concurrency_key, p_concurrency_limit, p_delay_ms, v_now);
  return worker.enqueue_prepared(v_p.job, v_p.request, v_now);
end $$;

-- Batch enqueue: one call for up to thousands of jobs, all or nothing. Each element uses the
-- HTTP field names: {type, payload, priority, runAt, delayMs, maxAttempts, dedupeKey, submitKey,
-- pool, weight, concurrencyKey, concurrencyLimit}, and is parsed and validated exactly as
-- enqueue_job_ex validates its arguments (prepare_enqueue); an error's COLUMN is prefixed with
-- the element (`jobs[3].runAt`).
create or replace function worker.enqueue_jobs(p_jobs jsonb, p_now timestamptz default null)
returns setof jsonb language plpgsql as $$
declare
  v_now  timestamptz := coalesce(p_now, now());
  v_rows worker.jobs[] := '{}';
  v_p    record;
  e      jsonb;
  i      int := 0;
  m text; c text; s text;
begin
  if jsonb_typeof(p_jobs) <> 'array' then
    raise exception 'jobs must be an array' using errcode = 'SB400', column = 'jobs';
  end if;
  -- Jobs without keys need no per-row race handling: prepare them all, then insert them in one
  -- statement.
  if not exists (select 1 from jsonb_array_elements(p_jobs) x
                  where jsonb_typeof(x) = 'object'
                    and (x->>'dedupeKey' is not null or x->>'submitKey' is not null)) then
    for e in select value from jsonb_array_elements(p_jobs) loop
      begin
        select * into v_p from worker.prepare_enqueue_element(e, v_now);
        v_rows := array_append(v_rows, v_p.job);
      exception when sqlstate 'SB400' then
        get stacked diagnostics m = message_text, c = column_name;
        raise exception 'jobs[%]: %', i, m using errcode = 'SB400', column = 'jobs[' || i || ']' || case when c = '' then '' else '.' || c end;
      end;
      i := i + 1;
    end loop;
    insert into worker.concurrency_keys (key)
    select distinct r.concurrency_key from unnest(v_rows) r where r.concurrency_key is not null order by 1
    on conflict do nothing;
    return query
      with input as (
        select r.* from unnest(v_rows) with ordinality r   -- the job's columns and `ordinality`
      ), ins as (
        insert into worker.jobs (id, type, payload, priority, run_at, max_attempts, pool, weight,
                                 concurrency_key, concurrency_limit, created_at)
        select i.id, i.type, i.payload, i.priority, i.run_at, i.max_attempts, i.pool, i.weight,
               i.concurrency_key, i.concurrency_limit, i.created_at
          from input i order by i.ordinality
        returning *
      ), ev as (
        insert into worker.job_events (job_id, at, kind, detail)
        select ins.id, v_now, 'enqueued', jsonb_build_object('batch', true, 'runAt', ins.run_at) from ins
      )
      select to_jsonb(ins) || jsonb_build_object('_duplicate', false) from ins
        join input i on i.id = ins.id order by i.ordinality;
    return;
  end if;
  for e in select value from jsonb_array_elements(p_jobs) loop
    begin
      select * into v_p from worker.prepare_enqueue_element(e, v_now);
      return next worker.enqueue_prepared(v_p.job, v_p.request, v_now);
    exception when sqlstate 'SB400' or sqlstate 'SB409' then
      get stacked diagnostics m = message_text, c = column_name, s = returned_sqlstate;
      raise exception 'jobs[%]: %', i, m using errcode = s, column = 'jobs[' || i || ']' || case when c = '' then '' else '.' || c end;
    end;
    i := i + 1;
  end loop;
end $$;
