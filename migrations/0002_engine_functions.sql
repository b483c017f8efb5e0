-- Engine operations that must be atomic under concurrency live here as SQL functions, so a
-- claim or an enqueue is one round trip and other services can call them without our code.
-- Every function takes an optional `now` so tests can pin time; null means the database clock.

-- Validation shared by single and batch enqueue. Raises SB400 with COLUMN naming the field.
create function worker.validate_enqueue(
  p_type text, p_payload jsonb, p_priority int, p_max_attempts int, p_weight text,
  p_dedupe_key text, p_submit_key text, p_pool text, p_concurrency_key text, p_concurrency_limit int
) returns void language plpgsql stable as $$
begin
  if p_type is null or not exists (select 1 from worker.job_types t where t.type = p_type) then
    raise exception 'unknown job type "%"', coalesce(p_type, '(null)') using errcode = 'SB400', column = 'type';
  end if;
  if p_payload is null or jsonb_typeof(p_payload) <> 'object' then
    raise exception 'payload must be a JSON object, got %', coalesce(jsonb_typeof(p_payload), 'null')
      using errcode = 'SB400', column = 'payload';
  end if;
  if p_priority is null or p_priority not between 0 and 1000 then
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
end $$;

-- The engine's enqueue. Returns the job as jsonb plus `_duplicate` (a repeated submit_key) and
-- `_superseded` (the waiting job this one replaced), which the public enqueue_job drops.
create function worker.enqueue_job_ex(
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
  v_id      uuid := gen_random_uuid();
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

-- The plain-SQL enqueue other services call, e.g. in the same transaction as their own data:
--   select * from worker.enqueue_job(type => 'uppercase', payload => '{"text":"hi"}');
create function worker.enqueue_job(
  type text, payload jsonb default '{}'::jsonb, priority int default 50, run_at timestamptz default null,
  max_attempts int default null, dedupe_key text default null, submit_key text default null,
  pool text default null, weight text default null, concurrency_key text default null,
  concurrency_limit int default null, delay_ms bigint default null
) returns worker.jobs language sql as $$
  -- called in FROM, so the enqueue runs once (a (f(...)).* select list would call it per column)
  select r.* from jsonb_populate_record(null::worker.jobs,
           worker.enqueue_job_ex($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)) r
$$;

-- Batch enqueue: one call for up to thousands of jobs, all or nothing. Each element uses the
-- HTTP field names: {type, payload, priority, runAt, delayMs, maxAttempts, dedupeKey, submitKey,
-- pool, weight, concurrencyKey, concurrencyLimit}.
create function worker.enqueue_jobs(p_jobs jsonb, p_now timestamptz default null)
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
    return query
      with input as (
        select gen_random_uuid() as id, x.value as e, x.ord
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

-- Crash recovery: a running job whose lease expired without a settle. Re-queued one weight
-- class up; at the top class it ends oom_killed; with its attempts used up it ends failed.
-- Each outcome writes events, and the terminal ones open an alert. Returns the counts.
create function worker.rescue_expired_leases(p_limit int default 1000, p_now timestamptz default null,
  out requeued int, out failed int, out oom_killed int)
language plpgsql as $$
declare
  v_now timestamptz := coalesce(p_now, now());
begin
  with expired as (
    select j.id, j.weight, j.attempts, j.max_attempts, j.locked_by, j.lease_token,
           (select w2.name from worker.weight_classes w1 join worker.weight_classes w2 on w2.rank > w1.rank
             where w1.name = j.weight order by w2.rank limit 1) as next_weight
      from worker.jobs j
     where j.status = 'running' and j.locked_until < v_now
     order by j.locked_until
     limit p_limit
       for update skip locked
  ), decided as (
    select x.*, case when x.next_weight is null then 'oom_killed'
                     when x.attempts >= x.max_attempts then 'failed'
                     else 'queued' end as outcome
      from expired x
  ), upd as (
    update worker.jobs j
       set status = d.outcome,
           weight = coalesce(d.next_weight, j.weight),
           crashes = j.crashes + 1,
           run_at = case when d.outcome = 'queued' then v_now else j.run_at end,
           locked_until = null, running_pool = null,
           finished_at = case when d.outcome = 'queued' then null else v_now end,
           last_error = case d.outcome
             when 'oom_killed' then 'lease expired at the top weight class (' || j.weight || '): oom_killed'
             when 'failed' then 'lease expired on the final attempt (' || j.attempts || '/' || j.max_attempts || ')'
             else 'lease expired (owner ' || coalesce(j.locked_by, '?') || ' crashed or timed out)' end
      from decided d
     where j.id = d.id
    returning j.id, j.type, d.outcome, d.weight as from_weight, d.next_weight, d.locked_by, d.lease_token, j.attempts
  ), ev as (
    insert into worker.job_events (job_id, at, kind, detail)
    select u.id, v_now, 'lease_expired', jsonb_build_object('owner', u.locked_by, 'token', u.lease_token, 'attempt', u.attempts)
      from upd u
    union all
    select u.id, v_now, 'escalated', jsonb_build_object('from', u.from_weight, 'to', u.next_weight)
      from upd u where u.outcome = 'queued'
    union all
    select u.id, v_now, u.outcome, jsonb_build_object('reason', 'lease expired')
      from upd u where u.outcome <> 'queued'
  ), al as (
    insert into worker.alerts (kind, key, job_id, message, detail, opened_at, last_seen_at)
    select case u.outcome when 'oom_killed' then 'lease_oom' else 'poison_job' end, u.id::text, u.id,
           'job ' || u.id || ' (' || u.type || ') ended ' || u.outcome || ' after its lease expired',
           jsonb_build_object('type', u.type, 'attempts', u.attempts), v_now, v_now
      from upd u where u.outcome <> 'queued'
    on conflict do nothing
  )
  select count(*) filter (where outcome = 'queued'), count(*) filter (where outcome = 'failed'),
         count(*) filter (where outcome = 'oom_killed')
    into requeued, failed, oom_killed
    from upd;
end $$;

-- Claim up to p_limit due jobs for a runner of pool p_pool. Expired leases are rescued first
-- (so they are claimable again), then queued rows are taken with FOR UPDATE SKIP LOCKED in
-- (priority, run_at) order, honouring: pool routing, the pool's capacity (enabled, max running
-- weight; its row is locked so concurrent claimers of one pool see each other's claims), the
-- per-key concurrency limits (key rows locked in key order, counted after the lock), and at
-- most one active job per dedupe key. Candidates whose key turns out full are passed over and
-- the next round looks past that key, so a flood of one account's jobs cannot block the rest.
create function worker.claim_jobs(p_worker text, p_pool text, p_limit int, p_now timestamptz default null)
returns setof worker.jobs language plpgsql as $$
declare
  v_now       timestamptz := coalesce(p_now, now());
  v_cap       worker.pool_capacity;
  v_budget    int;                 -- remaining pool weight; null = no capacity row for this pool
  v_ids       uuid[];
  v_keys      text[];
  v_full      text[] := '{}';      -- keys at their limit: skipped by later rounds
  v_admitted  uuid[] := '{}';
  v_rejected  boolean;
  c           record;
  v_running   int;
  v_taken     jsonb := '{}'::jsonb; -- per concurrency key: admitted in this claim
begin
  if p_limit < 1 then return; end if;
  if exists (select 1 from worker.jobs j where j.status = 'running' and j.locked_until < v_now) then
    perform worker.rescue_expired_leases(p_limit, v_now);
  end if;

  if p_pool is not null then
    select * into v_cap from worker.pool_capacity pc where pc.pool = p_pool for update;
    if found then
      if not v_cap.enabled then return; end if;
      select v_cap.max_running_weight - coalesce(sum(w.cost), 0) into v_budget
        from worker.jobs j join worker.weight_classes w on w.name = j.weight
       where j.status = 'running' and j.running_pool = p_pool and j.locked_until >= v_now;
      if v_budget <= 0 then return; end if;
    end if;
  end if;

  for round in 1..4 loop
    select array_agg(x.id order by x.priority, x.run_at),
           array_agg(distinct x.concurrency_key) filter (where x.concurrency_key is not null)
      into v_ids, v_keys
      from (select j.id, j.priority, j.run_at, j.concurrency_key
              from worker.jobs j
             where j.status = 'queued' and j.run_at <= v_now
               and (j.pool is null or j.pool is not distinct from p_pool)
               and (j.concurrency_key is null or j.concurrency_key <> all (v_full))
               and (v_budget is null or (select w.cost from worker.weight_classes w where w.name = j.weight) <= v_budget)
               and j.id <> all (v_admitted)
               and (j.dedupe_key is null or j.started_at is not null or not exists (
                     select 1 from worker.jobs a
                      where a.dedupe_key = j.dedupe_key and a.status in ('queued', 'running') and a.started_at is not null))
             order by j.priority, j.run_at
             limit p_limit - cardinality(v_admitted)
               for update of j skip locked) x;
    exit when v_ids is null;

    if v_budget is null and v_keys is null then
      v_admitted := v_admitted || v_ids;  -- the common case: no limits apply
      exit;
    end if;
    if v_keys is not null then
      insert into worker.concurrency_keys (key) select unnest(v_keys) on conflict do nothing;
      perform 1 from worker.concurrency_keys k where k.key = any (v_keys) order by k.key for update;
    end if;
    v_rejected := false;
    for c in select j.id, j.concurrency_key, j.concurrency_limit, w.cost
               from unnest(v_ids) with ordinality u(id, ord)
               join worker.jobs j on j.id = u.id
               join worker.weight_classes w on w.name = j.weight
              order by u.ord loop
      continue when v_budget is not null and c.cost > v_budget;
      if c.concurrency_key is not null then
        continue when c.concurrency_key = any (v_full);
        select count(*) into v_running from worker.jobs j
         where j.concurrency_key = c.concurrency_key and j.status = 'running' and j.locked_until >= v_now;
        if v_running + coalesce((v_taken->>c.concurrency_key)::int, 0) >= c.concurrency_limit then
          v_full := v_full || c.concurrency_key;
          v_rejected := true;
          continue;
        end if;
        v_taken := v_taken || jsonb_build_object(c.concurrency_key, coalesce((v_taken->>c.concurrency_key)::int, 0) + 1);
      end if;
      v_admitted := v_admitted || c.id;
      if v_budget is not null then v_budget := v_budget - c.cost; end if;
    end loop;
    exit when not v_rejected or cardinality(v_admitted) >= p_limit or v_budget <= 0;
  end loop;

  if cardinality(v_admitted) = 0 then return; end if;
  return query
    with upd as (
      update worker.jobs j
         set status = 'running', attempts = j.attempts + 1, locked_by = p_worker,
             lease_token = gen_random_uuid(),
             locked_until = v_now + make_interval(secs => t.lease_ms / 1000.0),
             running_pool = p_pool, claimed_at = v_now, started_at = coalesce(j.started_at, v_now)
        from worker.job_types t
       where j.id = any (v_admitted) and t.type = j.type
      returning j.*
    ), ev as (
      insert into worker.job_events (job_id, at, kind, detail)
      select u.id, v_now, 'claimed', jsonb_build_object('owner', u.locked_by, 'token', u.lease_token,
             'attempt', u.attempts, 'step', u.step, 'lockedUntil', u.locked_until)
        from upd u
    )
    select * from upd order by priority, run_at;
end $$;

-- The leader lease. Renew if p_holder holds it and it has not expired; acquire it (generation
-- + 1) if it is free or expired; otherwise p_holder is a follower. Sticky: no failback.
create function worker.claim_leader_lease(p_holder text, p_ttl_ms int default 300000, p_now timestamptz default null,
  p_name text default 'default', out is_leader boolean, out outcome text, out holder text,
  out generation bigint, out expires_at timestamptz)
language plpgsql as $$
declare
  v_now timestamptz := coalesce(p_now, now());
  v_row worker.leader_lease;
begin
  insert into worker.leader_lease (name) values (p_name) on conflict do nothing;
  select * into v_row from worker.leader_lease l where l.name = p_name for update;
  if v_row.holder = p_holder and v_row.expires_at > v_now then
    update worker.leader_lease l set expires_at = v_now + make_interval(secs => p_ttl_ms / 1000.0)
     where l.name = p_name returning * into v_row;
    outcome := 'renewed';
  elsif v_row.holder is null or v_row.expires_at <= v_now then
    update worker.leader_lease l
       set holder = p_holder, acquired_at = v_now, expires_at = v_now + make_interval(secs => p_ttl_ms / 1000.0),
           generation = l.generation + 1
     where l.name = p_name returning * into v_row;
    outcome := 'acquired';
  else
    outcome := 'follower';
  end if;
  is_leader := outcome <> 'follower';
  holder := v_row.holder;
  generation := v_row.generation;
  expires_at := v_row.expires_at;
end $$;
