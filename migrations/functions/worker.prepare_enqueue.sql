CREATE OR REPLACE FUNCTION worker.prepare_enqueue(p_type text, p_payload jsonb, p_priority integer, p_run_at timestamp with time zone, p_max_attempts integer, p_dedupe_key text, p_submit_key text, p_pool text, p_weight text, p_concurrency_key text, p_concurrency_limit integer, p_delay_ms bigint, p_now timestamp with time zone, OUT job worker.jobs, OUT request jsonb)
 RETURNS record
 LANGUAGE plpgsql
AS $function$
declare
  v_type   worker.job_types;
  v_job    worker.jobs;
  v_cost   int;
  v_max    int;
  v_max_weight text;
  v_above  boolean;
  v_key    text := p_concurrency_key;
  v_limit  int := p_concurrency_limit;
  v_owners text;
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
    -- the classes are rows, not a literal list: the refusal reads them, on the refusal's path only
    raise exception 'unknown weight class "%": must be one of %', p_weight,
      (select string_agg('"' || w.name || '"', ', ' order by w.rank, w.name) from worker.weight_classes w)
      using errcode = 'SB400', column = 'weight';
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
  -- A pinned job runs only in its pool: if its class is above the pool's largest class, or one
  -- job of it costs more than the pool may ever run at once (in any window), no claim can take
  -- it and it would wait forever. (An unpinned job can run in any pool; a pool without a
  -- capacity row has no limit.)
  if p_pool is not null then
    select worker.pool_largest_capacity(pc.pool), w.cost, pc.max_weight, w.rank > m.rank
      into v_max, v_cost, v_max_weight, v_above
      from worker.pool_capacity pc
      join worker.weight_classes w on w.name = v_job.weight
      left join worker.weight_classes m on m.name = pc.max_weight
     where pc.pool = p_pool;
    if v_above then
      raise exception 'weight "%" is above pool "%"''s largest class (max_weight %): no claim could take this job',
        v_job.weight, p_pool, v_max_weight using errcode = 'SB400', column = 'weight';
    end if;
    if v_cost > v_max then
      raise exception 'weight "%" costs %, more than pool "%" can ever run (max_running_weight %): no claim could take this job',
        v_job.weight, v_cost, p_pool, v_max using errcode = 'SB400', column = 'weight';
    end if;
  end if;
  if v_type.payload_schema is not null then
    perform worker.check_payload(v_type.payload_schema, p_payload, 'payload');
  end if;
  -- The type's own concurrency key (0120): derived from the payload and applied here, where every
  -- enqueue passes (SQL, TypeScript, each HTTP route, single and batch), so no caller can move a
  -- job of the type off its key or raise its limit. A caller may restate the derived key and
  -- limit (the provisioning routes do), nothing else.
  if v_type.concurrency_key is not null then
    v_key := worker.payload_key(v_type.concurrency_key, p_payload, 'concurrency key');
    v_limit := v_type.concurrency_limit;
    if (p_concurrency_key is not null and p_concurrency_key <> v_key)
       or (p_concurrency_limit is not null and p_concurrency_limit <> v_limit) then
      raise exception 'job type "%" sets its own concurrency key (%, at most % at once): leave concurrencyKey and concurrencyLimit out',
        p_type, v_type.concurrency_key, v_limit using errcode = 'SB400', column = 'concurrencyKey';
    end if;
  elsif p_concurrency_key is not null then
    -- A key of that shape belongs to the types that derive it: a job of another type holding it
    -- would take their slots (a running job counts against every job of its key).
    select string_agg(t.type, ', ' order by t.type) into v_owners
      from worker.job_types t
     where t.concurrency_key is not null and p_concurrency_key like worker.concurrency_key_pattern(t.concurrency_key);
    if v_owners is not null then
      raise exception 'concurrency key "%" is reserved for job type(s) % (derived from their payload): choose another',
        p_concurrency_key, v_owners using errcode = 'SB400', column = 'concurrencyKey';
    end if;
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
  v_job.concurrency_key := v_key;
  v_job.concurrency_limit := v_limit;
  -- The type's rate key and fairness key (0210); an enqueue that names its own replaces them
  -- after this (worker.prepare_flow_keys, 0240).
  v_job.rate_key := v_type.rate_key;
  if v_type.fair_key is not null then
    v_job.fair_key := worker.payload_key(v_type.fair_key, p_payload, 'fairness key');
  end if;
  v_job.created_at := coalesce(p_now, now());
  job := v_job;
  -- What makes two submissions "the same request", besides the payload (time fields excluded:
  -- a retry is later): the fields as given, not the type's defaults they resolve to. Stored only
  -- for a submit-keyed job (enqueue_prepared); the enqueued event records it with the payload.
  request := jsonb_build_object('type', p_type, 'priority', p_priority,
    'maxAttempts', p_max_attempts, 'dedupeKey', p_dedupe_key, 'pool', p_pool, 'weight', p_weight,
    'concurrencyKey', p_concurrency_key, 'concurrencyLimit', p_concurrency_limit);
end $function$
;
