CREATE OR REPLACE FUNCTION worker.enqueue_jobs(p_jobs jsonb, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS SETOF jsonb
 LANGUAGE plpgsql
AS $function$
declare
  v_now  timestamptz := coalesce(p_now, now());
  v_rows worker.jobs[] := '{}';
  v_p    record;
  e      jsonb;
  i      int := 0;
  m text; c text; s text;
  v_plain boolean := true;
begin
  if jsonb_typeof(p_jobs) <> 'array' then
    raise exception 'jobs must be an array' using errcode = 'SB400', column = 'jobs';
  end if;
  -- Jobs without keys need no per-row race handling: prepare them all, then insert them in one
  -- statement.
  if not exists (select 1 from jsonb_array_elements(p_jobs) x
                  where jsonb_typeof(x) = 'object'
                    and (x->>'dedupeKey' is not null or x->>'submitKey' is not null)) then
    -- The plain batch, every element {type, payload, priority?, maxAttempts?} of a type with no
    -- concurrency key of its own, each value of the shape the element path takes without
    -- question: validated and inserted in set-wise statements, the row each element gets
    -- being the one worker.prepare_enqueue gives it (run_at and created_at now, the type's
    -- weight and max_attempts, priority 50). Per element the path below costs two PL/pgSQL
    -- calls and a dozen checks, the larger half of a batch enqueue's time. Anything else, or a
    -- payload its type's schema refuses, takes the path below, which names the refused element.
    if exists (select 1 from jsonb_array_elements(p_jobs) x
                left join worker.job_types t on t.type = x->>'type'
               where jsonb_typeof(x) <> 'object'
                  or exists (select 1 from jsonb_object_keys(x) k where k not in ('type', 'payload', 'priority', 'maxAttempts'))
                  or jsonb_typeof(x->'type') is distinct from 'string' or t.type is null or t.concurrency_key is not null
                  or t.rate_key is not null or t.fair_key is not null
                  or jsonb_typeof(coalesce(x->'payload', '{}'::jsonb)) <> 'object'
                  or (x ? 'priority' and not (jsonb_typeof(x->'priority') = 'number'
                        and (x->'priority')::numeric = trunc((x->'priority')::numeric) and (x->'priority')::numeric between 0 and 1000))
                  or (x ? 'maxAttempts' and not (jsonb_typeof(x->'maxAttempts') = 'number'
                        and (x->'maxAttempts')::numeric = trunc((x->'maxAttempts')::numeric) and (x->'maxAttempts')::numeric between 1 and 2147483647))) then
      v_plain := false;
    else
      begin
        perform worker.check_payload(t.payload_schema, coalesce(x->'payload', '{}'::jsonb), 'payload')
           from jsonb_array_elements(p_jobs) x join worker.job_types t on t.type = x->>'type'
          where t.payload_schema is not null;
      exception when sqlstate 'SB400' then
        v_plain := false;
      end;
    end if;
    if not v_plain then
      -- One exception block around the loop, not one per element: each block is a
      -- subtransaction, and the first refusal ends the batch anyway. i still names the element
      -- refused (a variable keeps its value when the block's work is rolled back).
      begin
        for e in select value from jsonb_array_elements(p_jobs) loop
          select * into v_p from worker.prepare_enqueue_element(e, v_now);
          v_rows := array_append(v_rows, v_p.job);
          i := i + 1;
        end loop;
      exception when sqlstate 'SB400' then
        get stacked diagnostics m = message_text, c = column_name;
        raise exception 'jobs[%]: %', i, m using errcode = 'SB400', column = 'jobs[' || i || ']' || case when c = '' then '' else '.' || c end;
      end;
      insert into worker.concurrency_keys (key)
      select distinct r.concurrency_key from unnest(v_rows) r where r.concurrency_key is not null order by 1
      on conflict do nothing;
    end if;
    -- One insert for both: the plain batch's rows made here (ids in the elements' order, before
    -- any join can reorder them: id order is creation order), or the rows the elements' path
    -- prepared.
    return query
      with elements as materialized (
        select x.o, worker.uuidv7() as id, x.e from jsonb_array_elements(p_jobs) with ordinality x(e, o) where v_plain
      ), input as (
        select x.o as ordinality, x.id, t.type, coalesce(x.e->'payload', '{}'::jsonb) as payload,
               coalesce((x.e->'priority')::numeric::int, 50) as priority, v_now as run_at,
               coalesce((x.e->'maxAttempts')::numeric::int, t.max_attempts) as max_attempts, null::text as pool, t.weight,
               null::text as concurrency_key, null::int as concurrency_limit, v_now as created_at,
               -- the type's deadline, from the row already joined (0180)
               v_now + make_interval(secs => t.deadline_ms / 1000.0) as deadline_at, t.deadline_severity,
               null::text as rate_key, null::text as fair_key
          from elements x join worker.job_types t on t.type = x.e->>'type'
        union all
        select r.ordinality, r.id, r.type, r.payload, r.priority, r.run_at, r.max_attempts, r.pool, r.weight,
               r.concurrency_key, r.concurrency_limit, r.created_at, r.deadline_at, r.deadline_severity, r.rate_key, r.fair_key
          from unnest(v_rows) with ordinality r   -- the job's columns and `ordinality`
      ), ins as (
        -- the enqueued event is held on the row (0160): it takes only its id here
        insert into worker.jobs (id, type, payload, priority, run_at, max_attempts, pool, weight,
                                 concurrency_key, concurrency_limit, created_at, enqueued_event_id, deadline_at, deadline_severity,
                                 rate_key, fair_key)
        select i.id, i.type, i.payload, i.priority, i.run_at, i.max_attempts, i.pool, i.weight,
               i.concurrency_key, i.concurrency_limit, i.created_at, nextval('worker.job_events_id_seq'), i.deadline_at, i.deadline_severity,
               i.rate_key, i.fair_key
          from input i order by i.ordinality
        returning *
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
end $function$
;
