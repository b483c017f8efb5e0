-- Performance (issue 8), second pass: fewer and cheaper index writes per job transition.
--
-- Claim and settle are not HOT updates (status is in the claim and lease indexes' predicates), so
-- each new row version takes an entry in every btree whose predicate it matches, and each event
-- takes one in every btree of job_events. Measured with callgrind on a single backend (10,000 jobs
-- claimed and completed in batches of 128), btree inserts were a quarter of the instructions.

-- Job ids become UUIDv7 (48-bit Unix milliseconds, then random bits): ordered by creation, so
-- the primary key serves "newest first" listings and jobs_created_idx can go; and a new row
-- version's primary-key entry lands on the recently used right edge of the index instead of a
-- random leaf, which matters once a long history no longer fits in shared_buffers. PostgreSQL 17
-- has no uuidv7(); this one sets the version (7) and keeps gen_random_uuid's variant bits.
create function worker.uuidv7() returns uuid language sql volatile parallel safe as $$
  select encode(
           set_bit(set_bit(
             overlay(uuid_send(gen_random_uuid())
                     placing substring(int8send(floor(extract(epoch from clock_timestamp()) * 1000)::bigint) from 3)
                     from 1 for 6),
             52, 1), 53, 1),
           'hex')::uuid
$$;

alter table worker.jobs alter column id set default worker.uuidv7();
drop index worker.jobs_created_idx;

-- Events are appended in time order and pruned oldest first, so retention can walk the primary
-- key (id) from its left edge instead of keeping a second index on `at`. (A BRIN index on `at`
-- would be cheaper to write, but pruned pages are refilled by new events and a BRIN range never
-- narrows again: after one retention period every range would match the prune.)
drop index worker.job_events_at_idx;

-- The enqueue functions of 0002, restated to take their ids from worker.uuidv7() and to create
-- the row of a job's concurrency key with the job.

-- The engine's enqueue. Returns the job as jsonb plus `_duplicate` (a repeated submit_key) and
-- `_superseded` (the waiting job this one replaced), which the public enqueue_job drops.
create or replace function worker.enqueue_job_ex(
  p_type text, p_payload jsonb default '{}'::jsonb, p_priority int default 50, p_run_at timestamptz default null,
  p_max_attempts int default null, p_dedupe_key text default null, p_submit_key text default null,
  p_pool text default null, p_weight text default null, p_concurrency_key text default null,
  p_concurrency_limit int default null, p_delay_ms bigint default null, p_now timestamptz default null
) returns jsonb language plpgsql as $$
declare
  v_now     timestamptz := coalesce(p_now, now());
  v_type    worker.job_types;
  v_request jsonb;
  v_row     worker.jobs;
  v_id      uuid := worker.uuidv7();
  v_old     uuid;
begin
  p_priority := coalesce(p_priority, 50);
  p_payload := coalesce(p_payload, '{}'::jsonb);
  perform worker.validate_enqueue(p_type, p_payload, p_priority, p_max_attempts, p_weight,
    p_dedupe_key, p_submit_key, p_pool, p_concurrency_key, p_concurrency_limit);
  if p_delay_ms is not null and p_delay_ms < 0 then
    raise exception 'delayMs must not be negative' using errcode = 'SB400', column = 'delayMs';
  end if;
  select * into v_type from worker.job_types t where t.type = p_type;
  -- What makes two submissions "the same request" (time fields excluded: a retry is later).
  v_request := jsonb_build_object('type', p_type, 'payload', p_payload, 'priority', p_priority,
    'maxAttempts', p_max_attempts, 'dedupeKey', p_dedupe_key, 'pool', p_pool, 'weight', p_weight,
    'concurrencyKey', p_concurrency_key, 'concurrencyLimit', p_concurrency_limit);

  -- The claim locks a job's concurrency-key row; creating it with the job means a claim never has
  -- to create one, so it can avoid waiting where a wait could deadlock (0063).
  if p_concurrency_key is not null then
    insert into worker.concurrency_keys (key) values (p_concurrency_key) on conflict do nothing;
  end if;

  loop
    if p_submit_key is not null then
      select * into v_row from worker.jobs j where j.submit_key = p_submit_key;
      if found then
        if (select e.detail->'request' from worker.job_events e
             where e.job_id = v_row.id and e.kind = 'enqueued' order by e.id limit 1) is distinct from v_request then
          raise exception 'submit_key "%" was already used for a different request (job %)', p_submit_key, v_row.id
            using errcode = 'SB409', column = 'submitKey';
        end if;
        return to_jsonb(v_row) || jsonb_build_object('_duplicate', true);
      end if;
    end if;

    v_old := null;
    if p_dedupe_key is not null then
      -- Supersede the waiting (never started) job of this key; an active one is left alone
      -- and the new job waits behind it (the claim skips keys with an active job).
      update worker.jobs j
         set status = 'cancelled', finished_at = v_now, superseded_by = v_id,
             last_error = 'superseded by job ' || v_id
       where j.dedupe_key = p_dedupe_key and j.status = 'queued' and j.started_at is null
      returning j.id into v_old;
      if v_old is not null then
        insert into worker.job_events (job_id, at, kind, detail)
        values (v_old, v_now, 'superseded', jsonb_build_object('by', v_id));
      end if;
    end if;

    insert into worker.jobs (id, type, payload, priority, run_at, max_attempts, dedupe_key, submit_key,
                             pool, weight, concurrency_key, concurrency_limit, created_at)
    values (v_id, p_type, p_payload, p_priority,
            coalesce(p_run_at, v_now + make_interval(secs => coalesce(p_delay_ms, 0) / 1000.0)),
            coalesce(p_max_attempts, v_type.max_attempts), p_dedupe_key, p_submit_key,
            p_pool, coalesce(p_weight, v_type.weight), p_concurrency_key, p_concurrency_limit, v_now)
    on conflict do nothing
    returning * into v_row;
    if found then
      insert into worker.job_events (job_id, at, kind, detail)
      values (v_id, v_now, 'enqueued', jsonb_build_object('request', v_request, 'runAt', v_row.run_at)
              || case when v_old is null then '{}'::jsonb else jsonb_build_object('supersedes', v_old) end);
      return to_jsonb(v_row) || jsonb_build_object('_duplicate', false, '_superseded', v_old);
    end if;
    -- A concurrent enqueue took the submit key or the key's waiting slot first: go again,
    -- which either returns its job (same submit key) or supersedes it (same dedupe key).
  end loop;
end $$;

-- Batch enqueue: one call for up to thousands of jobs, all or nothing. Each element uses the
-- HTTP field names: {type, payload, priority, runAt, delayMs, maxAttempts, dedupeKey, submitKey,
-- pool, weight, concurrencyKey, concurrencyLimit}.
create or replace function worker.enqueue_jobs(p_jobs jsonb, p_now timestamptz default null)
returns setof jsonb language plpgsql as $$
declare
  v_now timestamptz := coalesce(p_now, now());
  e jsonb;
  i int := 0;
begin
  if jsonb_typeof(p_jobs) <> 'array' then
    raise exception 'jobs must be an array' using errcode = 'SB400', column = 'jobs';
  end if;
  -- Jobs without keys need no per-row race handling: validate, then insert them in one statement.
  if not exists (select 1 from jsonb_array_elements(p_jobs) x
                  where x ? 'dedupeKey' and x->>'dedupeKey' is not null
                     or x ? 'submitKey' and x->>'submitKey' is not null) then
    for e in select value from jsonb_array_elements(p_jobs) loop
      begin
        perform worker.validate_enqueue(e->>'type', coalesce(e->'payload', '{}'::jsonb),
          coalesce((e->>'priority')::int, 50), (e->>'maxAttempts')::int, e->>'weight', null, null,
          e->>'pool', e->>'concurrencyKey', (e->>'concurrencyLimit')::int);
      exception when sqlstate 'SB400' then
        declare m text; c text; begin
          get stacked diagnostics m = message_text, c = column_name;
          raise exception 'jobs[%]: %', i, m using errcode = 'SB400', column = 'jobs[' || i || '].' || c;
        end;
      end;
      i := i + 1;
    end loop;
    insert into worker.concurrency_keys (key)
    select distinct x->>'concurrencyKey' from jsonb_array_elements(p_jobs) x
     where x->>'concurrencyKey' is not null order by 1
    on conflict do nothing;
    return query
      with input as (
        select worker.uuidv7() as id, x.value as e, x.ord
          from jsonb_array_elements(p_jobs) with ordinality x(value, ord)
      ), ins as (
        insert into worker.jobs (id, type, payload, priority, run_at, max_attempts, pool, weight,
                                 concurrency_key, concurrency_limit, created_at)
        select i.id, i.e->>'type', coalesce(i.e->'payload', '{}'::jsonb), coalesce((i.e->>'priority')::int, 50),
               coalesce((i.e->>'runAt')::timestamptz,
                        v_now + make_interval(secs => coalesce((i.e->>'delayMs')::bigint, 0) / 1000.0)),
               coalesce((i.e->>'maxAttempts')::int, t.max_attempts), i.e->>'pool', coalesce(i.e->>'weight', t.weight),
               i.e->>'concurrencyKey', (i.e->>'concurrencyLimit')::int, v_now
          from input i join worker.job_types t on t.type = i.e->>'type'
         order by i.ord
        returning *
      ), ev as (
        insert into worker.job_events (job_id, at, kind, detail)
        select ins.id, v_now, 'enqueued', jsonb_build_object('batch', true, 'runAt', ins.run_at) from ins
      )
      select to_jsonb(ins) || jsonb_build_object('_duplicate', false) from ins
        join input i on i.id = ins.id order by i.ord;
    return;
  end if;
  for e in select value from jsonb_array_elements(p_jobs) loop
    begin
      return next worker.enqueue_job_ex(e->>'type', coalesce(e->'payload', '{}'::jsonb), (e->>'priority')::int,
        (e->>'runAt')::timestamptz, (e->>'maxAttempts')::int, e->>'dedupeKey', e->>'submitKey', e->>'pool',
        e->>'weight', e->>'concurrencyKey', (e->>'concurrencyLimit')::int, (e->>'delayMs')::bigint, v_now);
    exception when sqlstate 'SB400' or sqlstate 'SB409' then
      declare m text; c text; s text; begin
        get stacked diagnostics m = message_text, c = column_name, s = returned_sqlstate;
        raise exception 'jobs[%]: %', i, m using errcode = s, column = 'jobs[' || i || '].' || c;
      end;
    end;
    i := i + 1;
  end loop;
end $$;
