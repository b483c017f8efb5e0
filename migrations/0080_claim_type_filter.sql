-- A runner claimed every due job, whatever its type, and failed the ones it had no handler for
-- as "unknown job type" (with a poison alert): `npm run worker` against a database whose other
-- types (cleanup, build, invoice, provisioning) another runner serves destroyed their jobs.
-- A claim can now name the types it can run: p_types null (the default) takes every type, as
-- before; a list takes only jobs of those types (an empty list takes none). A job of a type
-- nobody claims stays queued: visible in inspect and the metrics, never failed.
--
-- The filter is one more condition on the candidate walk (the queued-rows index in priority,
-- run_at order); the rescue of expired leases at the start of a claim still covers every type,
-- since a lease expires whoever held it. Both signatures change, so the old ones are dropped
-- first (create or replace with another argument list would add an overload).

drop function worker.settle_and_claim(jsonb, text, text, int, timestamptz);
drop function worker.claim_jobs(text, text, int, timestamptz);

-- 0063's claim, with the type filter in its candidate query.
create function worker.claim_jobs(p_worker text, p_pool text, p_limit int, p_now timestamptz default null,
                                  p_types text[] default null)
returns setof worker.jobs language plpgsql
set plan_cache_mode = force_generic_plan  -- as 0061 set it (see there)
as $$
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
  v_held      text[] := '{}';      -- concurrency keys this claim has locked
  v_last      text;                -- the greatest of them: later waits are only for keys after it
  v_got       text[];
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
               and (p_types is null or j.type = any (p_types))
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
      -- Keys after the last one this claim holds (every key, in the first round) are waited for
      -- in key order: all claims take key locks in one order, so no wait closes a cycle. The
      -- insert matters only for a job written without the enqueue functions (0060 creates the
      -- key row with the job).
      insert into worker.concurrency_keys (key)
      select k from unnest(v_keys) k where v_last is null or k > v_last order by k
      on conflict do nothing;
      perform 1 from worker.concurrency_keys k
       where k.key = any (v_keys) and (v_last is null or k.key > v_last) order by k.key for update;
      -- Keys before it are taken only if free; one another claim holds is full for this claim.
      if v_last is not null then
        select coalesce(array_agg(l.key), '{}') into v_got
          from (select k.key from worker.concurrency_keys k
                 where k.key = any (v_keys) and k.key < v_last and k.key <> all (v_held)
                 order by k.key for update skip locked) l;
        v_full := v_full || array(select k from unnest(v_keys) k where k < v_last and k <> all (v_held) and k <> all (v_got));
        v_held := v_held || v_got;
      end if;
      v_held := v_held || array(select k from unnest(v_keys) k where v_last is null or k > v_last);
      v_last := (select max(k) from unnest(v_held) k);
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


-- As 0062, passing the type filter on to the claim.
create function worker.settle_and_claim(p_done jsonb, p_worker text, p_pool text, p_limit int, p_now timestamptz default null,
                                        p_types text[] default null)
returns json language plpgsql as $$
declare
  v_settled json := '[]'::json;
  v_jobs    json;
begin
  if jsonb_array_length(coalesce(p_done, '[]'::jsonb)) > 0 then
    select coalesce(json_agg(c.id), '[]'::json) into v_settled from worker.complete_jobs(p_done, p_now) c;
  end if;
  select coalesce(json_agg(json_build_array(
           j.id, j.type, j.payload, j.status, j.priority, j.run_at, j.attempts, j.max_attempts, j.locked_until,
           j.locked_by, j.lease_token, j.dedupe_key, j.submit_key, j.last_error, j.result, j.step, j.checkpoint,
           j.pool, j.weight, j.running_pool, j.concurrency_key, j.concurrency_limit, j.cancel_requested_at,
           j.cancel_reason, j.superseded_by, j.crashes, j.created_at, j.started_at, j.claimed_at, j.finished_at)), '[]'::json)
    into v_jobs from worker.claim_jobs(p_worker, p_pool, p_limit, p_now, p_types) j;
  return json_build_object('settled', v_settled, 'jobs', v_jobs);
end $$;
