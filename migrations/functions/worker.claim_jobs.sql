CREATE OR REPLACE FUNCTION worker.claim_jobs(p_worker text, p_pool text, p_limit integer, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone, p_types text[] DEFAULT NULL::text[])
 RETURNS SETOF worker.jobs
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
 SET enable_bitmapscan TO 'off'
 SET enable_seqscan TO 'off'
 SET jit TO 'off'
AS $function$
declare
  v_now       timestamptz := coalesce(p_now, now());
  v_cap       worker.pool_capacity;
  v_budget    int;                 -- remaining pool weight; null = no capacity row for this pool
  v_max_rank  int;                 -- the rank of the pool's largest class; null = any class
  v_ids       uuid[];              -- this round's candidates, locked, in claim order
  v_keys      text[];              -- their concurrency keys
  v_full      text[] := '{}';      -- keys with no room for this claim: later walks skip them
  v_lost      uuid[] := '{}';      -- candidates a round locked or picked but did not admit
  v_admitted  uuid[] := '{}';
  v_round     int := 0;
  v_losses    int;                 -- cardinality(v_lost) when the round began
  c           record;
  cur         refcursor;
  v_picked    uuid[];
  v_spend     int;                 -- the walk's running total of picked weight
  v_room      jsonb;               -- the walk's per-key room: limit - running - taken - picked
  v_n         int;
  v_running   jsonb;               -- per key: running jobs, counted under the key lock
  v_taken     jsonb := '{}'::jsonb; -- per key: admitted in this claim
  v_held      text[] := '{}';      -- concurrency keys this claim has locked
  v_last      text;                -- the greatest of them: later waits are only for keys after it
  v_got       text[];
  v_skip_types text[];             -- paused job types (0210); null: none
  v_rblocked  text[] := '{}';      -- rate keys with no room for this claim: paused, full, or held by another claim
  v_rheld     text[] := '{}';      -- rate keys this claim has locked
  v_rroom     jsonb := '{}'::jsonb; -- per held rate key: the starts it may still admit
  v_rwalk     jsonb;               -- the walk's per-rate-key room
  v_rkeys     text[];              -- the round's candidates' rate keys
  v_cand      uuid[];              -- the fair round's candidates, in turn order
  v_fair_short boolean := false;
  v_paused    boolean;             -- any pause in force
  v_rated     boolean;             -- any rate key declared
  v_fair      boolean;             -- any queued job with a fairness key   -- the fair round had fewer than p_limit: the walk may find more
begin
  if p_limit < 1 then return; end if;
  if exists (select 1 from worker.jobs j where j.status = 'running' and j.locked_until < v_now) then
    perform worker.rescue_expired_leases(p_limit, v_now);
  end if;

  -- Flow control (0210). A paused pool's runner claims nothing; a paused type's jobs are left
  -- queued. A rate key whose window is full or that a 429 paused is skipped from the start;
  -- one that fills during this claim joins it.
  -- (one statement for the three probes: the common path, with none of them, pays one)
  select exists (select 1 from worker.pauses), exists (select 1 from worker.rate_limits),
         exists (select 1 from worker.jobs j where j.status = 'queued' and j.fair_key is not null)
    into v_paused, v_rated, v_fair;
  if v_paused then
    if exists (select 1 from worker.pauses p where p.kind = 'pool' and p.name = p_pool) then return; end if;
    select array_agg(p.name) into v_skip_types from worker.pauses p where p.kind = 'type';
  end if;
  if v_rated then
    select coalesce(array_agg(r.key), '{}') into v_rblocked from worker.rate_limits r where worker.rate_limit_room(r, v_now) <= 0;
  end if;

  if p_pool is not null then
    select * into v_cap from worker.pool_capacity pc where pc.pool = p_pool for update;
    if found then
      if not v_cap.enabled then return; end if;
      -- The limit in force at this claim's now (a window of the day, else the pool's own): after
      -- it drops, running jobs go on and claims wait until their weight is under it.
      select worker.pool_limit_at(p_pool, v_now) - coalesce(sum(w.cost), 0) into v_budget
        from worker.jobs j join worker.weight_classes w on w.name = j.weight
       where j.status = 'running' and j.running_pool = p_pool and j.locked_until >= v_now;
      if v_budget <= 0 then return; end if;
      select w.rank into v_max_rank from worker.weight_classes w where w.name = v_cap.max_weight;
    end if;
  end if;

  -- The plain shape: nothing the walk below exists for is in play (a pool capacity leaves a
  -- budget; keys, pauses and fairness are probed above and here). Then the claim is one short
  -- statement (worker.claim_plain), and an unused feature costs it nothing but these probes.
  if v_budget is null and not v_paused and not v_rated and not v_fair
     and not exists (select 1 from worker.jobs j where j.status = 'queued' and j.concurrency_key is not null) then
    return query select * from worker.claim_plain(p_worker, p_pool, p_limit, v_now, p_types);
    return;
  end if;

  -- The candidates are read by walking jobs_claimable_idx in claim order. This function's plans
  -- are made once per session (generic plans) from the statistics of that moment, which for a
  -- queue are often an empty table's: then every statement here planned a sequential scan, and
  -- under a steady load each claim read the whole table, 1 to 4 ms a claim at 20,000 rows. And
  -- between vacuums a queue's indexes are mostly entries of claimed rows' dead versions, which
  -- an index scan marks dead as it passes (later walks skip them) and a bitmap scan never does.
  -- So sequential and bitmap scans are off for this function (and for complete_jobs and
  -- rescue_expired_leases), and run_at is compared as `run_at + 0` so that jobs_due_idx (run_at
  -- alone, the dispatchers' index) is no candidate: walking it would visit every due job before
  -- sorting them.
  loop
    v_round := v_round + 1;
    v_losses := cardinality(v_lost);
    if v_round = 1 and v_fair then
      -- Fair queueing: the first round takes its candidates round-robin across fairness keys;
      -- later rounds (the walk) fill what is left in claim order.
      v_cand := worker.fair_claim_candidates(p_pool, p_types, p_limit, v_now, v_budget, v_max_rank, v_skip_types, v_rblocked);
      exit when cardinality(v_cand) = 0;
      select array_agg(x.id order by array_position(v_cand, x.id)),
             array_agg(distinct x.concurrency_key) filter (where x.concurrency_key is not null),
             array_agg(distinct x.rate_key) filter (where x.rate_key is not null)
        into v_ids, v_keys, v_rkeys
        from (select j.id, j.concurrency_key, j.rate_key
                from worker.jobs j
               where j.id = any (v_cand) and j.status = 'queued' and j.run_at <= v_now
                 for update of j skip locked) x;
      v_lost := v_lost || array(select u.id from unnest(v_cand) u(id) where u.id <> all (coalesce(v_ids, '{}')));
      v_fair_short := cardinality(v_cand) < p_limit;
      continue when v_ids is null;  -- all locked by other claims: walk past them
      if v_budget is null and v_keys is null and v_rkeys is null and cardinality(v_lost) = 0 and not v_fair_short then
        v_admitted := v_ids;
        exit;
      end if;
    elsif v_round = 1 then
      select array_agg(x.id order by x.priority, x.run_at),
             array_agg(distinct x.concurrency_key) filter (where x.concurrency_key is not null),
             array_agg(distinct x.rate_key) filter (where x.rate_key is not null)
        into v_ids, v_keys, v_rkeys
        from (select j.id, j.priority, j.run_at, j.concurrency_key, j.rate_key
                from worker.jobs j
               where j.status = 'queued' and j.run_at + interval '0' <= v_now
                 and (j.pool is null or j.pool is not distinct from p_pool)
                 and (p_types is null or j.type = any (p_types))
                 and (v_skip_types is null or j.type <> all (v_skip_types))
                 and (j.rate_key is null or j.rate_key <> all (v_rblocked))
                 and (v_budget is null or (select w.cost <= v_budget and w.rank <= coalesce(v_max_rank, w.rank)
                                             from worker.weight_classes w where w.name = j.weight))
                 and (j.concurrency_key is null or
                      (select count(*) from worker.jobs r
                        where r.concurrency_key = j.concurrency_key and r.status = 'running' and r.locked_until >= v_now) < j.concurrency_limit)
                 and (j.dedupe_key is null or j.started_at is not null or not exists (
                       select 1 from worker.jobs a
                        where a.dedupe_key = j.dedupe_key and a.status in ('queued', 'running') and a.started_at is not null))
               order by j.priority, j.run_at
               limit p_limit
                 for update of j skip locked) x;
      exit when v_ids is null;
      if v_budget is null and v_keys is null and v_rkeys is null then
        v_admitted := v_ids;  -- the common case: no limits apply
        exit;
      end if;
    else
      -- The walk: claim order, without locks, skipping what earlier rounds ruled out; per key
      -- at most the room its running jobs (this snapshot) and this claim's admissions leave.
      v_picked := '{}';
      v_spend := 0;
      v_room := '{}'::jsonb;
      v_rwalk := '{}'::jsonb;
      open cur for
        select j.id, j.concurrency_key, j.concurrency_limit, j.rate_key, w.cost
          from worker.jobs j join worker.weight_classes w on w.name = j.weight
         where j.status = 'queued' and j.run_at + interval '0' <= v_now
           and (j.pool is null or j.pool is not distinct from p_pool)
           and (p_types is null or j.type = any (p_types))
           and (v_skip_types is null or j.type <> all (v_skip_types))
           and (j.rate_key is null or j.rate_key <> all (v_rblocked))
           and (v_budget is null or w.cost <= v_budget) and (v_max_rank is null or w.rank <= v_max_rank)
           and j.id <> all (v_admitted) and j.id <> all (v_lost)
           and (j.concurrency_key is null or (j.concurrency_key <> all (v_full) and
                (select count(*) from worker.jobs r
                  where r.concurrency_key = j.concurrency_key and r.status = 'running' and r.locked_until >= v_now) < j.concurrency_limit))
           and (j.dedupe_key is null or j.started_at is not null or not exists (
                 select 1 from worker.jobs a
                  where a.dedupe_key = j.dedupe_key and a.status in ('queued', 'running') and a.started_at is not null))
         order by j.priority, j.run_at;
      loop
        fetch cur into c;
        exit when not found;
        continue when v_budget is not null and v_spend + c.cost > v_budget;
        if c.rate_key is not null then
          if not v_rwalk ? c.rate_key then
            -- a key this claim holds: the room it counted; another: as this snapshot has it
            v_rwalk := v_rwalk || jsonb_build_object(c.rate_key, coalesce((v_rroom->>c.rate_key)::int,
                         (select worker.rate_limit_room(r, v_now) from worker.rate_limits r where r.key = c.rate_key), 0));
          end if;
          continue when (v_rwalk->>c.rate_key)::int <= 0;
        end if;
        if c.concurrency_key is not null then
          if not v_room ? c.concurrency_key then
            select count(*) into v_n from worker.jobs r
             where r.concurrency_key = c.concurrency_key and r.status = 'running' and r.locked_until >= v_now;
            v_room := v_room || jsonb_build_object(c.concurrency_key,
                        c.concurrency_limit - v_n - coalesce((v_taken->>c.concurrency_key)::int, 0));
          end if;
          continue when (v_room->>c.concurrency_key)::int <= 0;
          v_room := v_room || jsonb_build_object(c.concurrency_key, (v_room->>c.concurrency_key)::int - 1);
        end if;
        if c.rate_key is not null then
          v_rwalk := v_rwalk || jsonb_build_object(c.rate_key, (v_rwalk->>c.rate_key)::int - 1);
        end if;
        v_picked := v_picked || c.id;
        v_spend := v_spend + c.cost;
        exit when cardinality(v_admitted) + cardinality(v_picked) >= p_limit
               or (v_budget is not null and v_spend >= v_budget);
      end loop;
      close cur;
      exit when cardinality(v_picked) = 0;
      -- Lock the picks; one another claim locked first is lost to this claim.
      select array_agg(x.id order by x.priority, x.run_at),
             array_agg(distinct x.concurrency_key) filter (where x.concurrency_key is not null),
             array_agg(distinct x.rate_key) filter (where x.rate_key is not null)
        into v_ids, v_keys, v_rkeys
        from (select j.id, j.priority, j.run_at, j.concurrency_key, j.rate_key
                from worker.jobs j
               where j.id = any (v_picked) and j.status = 'queued' and j.run_at <= v_now
               order by j.priority, j.run_at
                 for update of j skip locked) x;
      v_lost := v_lost || array(select p from unnest(v_picked) p where p <> all (coalesce(v_ids, '{}')));
      continue when v_ids is null;  -- all lost: walk again past them
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
      -- Running jobs per key, counted now that the keys are locked: no other claim can add one.
      select coalesce(jsonb_object_agg(r.concurrency_key, r.n), '{}'::jsonb) into v_running
        from (select j.concurrency_key, count(*) as n from worker.jobs j
               where j.concurrency_key = any (v_keys) and j.concurrency_key = any (v_held)
                 and j.status = 'running' and j.locked_until >= v_now
               group by j.concurrency_key) r;
    end if;

    if v_rkeys is not null then
      -- Rate keys are locked only if free (SKIP LOCKED): a claim never waits for one, so they add
      -- no edge to the key locks' order; one another claim holds has no room for this claim.
      -- The room is counted after the lock, when no other claim can add a start.
      select coalesce(array_agg(l.key), '{}') into v_got
        from (select r.key from worker.rate_limits r
               where r.key = any (v_rkeys) and r.key <> all (v_rheld) order by r.key for update skip locked) l;
      v_rblocked := v_rblocked || array(select k from unnest(v_rkeys) k where k <> all (v_rheld) and k <> all (v_got));
      select v_rroom || coalesce(jsonb_object_agg(r.key, worker.rate_limit_room(r, v_now)), '{}'::jsonb) into v_rroom
        from worker.rate_limits r where r.key = any (v_got);
      v_rheld := v_rheld || v_got;
    end if;

    for c in select j.id, j.concurrency_key, j.concurrency_limit, j.rate_key, w.cost
               from unnest(v_ids) with ordinality u(id, ord)
               join worker.jobs j on j.id = u.id
               join worker.weight_classes w on w.name = j.weight
              order by u.ord loop
      if (v_budget is not null and c.cost > v_budget) or cardinality(v_admitted) >= p_limit then
        v_lost := v_lost || c.id;
        continue;
      end if;
      if c.rate_key is not null and (c.rate_key <> all (v_rheld) or coalesce((v_rroom->>c.rate_key)::int, 0) <= 0) then
        v_rblocked := v_rblocked || c.rate_key;
        v_lost := v_lost || c.id;
        continue;
      end if;
      if c.concurrency_key is not null then
        if c.concurrency_key = any (v_full) or c.concurrency_key <> all (v_held)
           or coalesce((v_running->>c.concurrency_key)::int, 0) + coalesce((v_taken->>c.concurrency_key)::int, 0) >= c.concurrency_limit then
          v_full := v_full || c.concurrency_key;
          v_lost := v_lost || c.id;
          continue;
        end if;
        v_taken := v_taken || jsonb_build_object(c.concurrency_key, coalesce((v_taken->>c.concurrency_key)::int, 0) + 1);
      end if;
      if c.rate_key is not null then
        v_rroom := v_rroom || jsonb_build_object(c.rate_key, (v_rroom->>c.rate_key)::int - 1);
      end if;
      v_admitted := v_admitted || c.id;
      if v_budget is not null then v_budget := v_budget - c.cost; end if;
    end loop;
    -- A round that lost nothing admitted all it found: the queue has no more for this claim
    -- (unless the fair round's lanes stopped short of the batch).
    exit when cardinality(v_admitted) >= p_limit or v_budget <= 0 or (cardinality(v_lost) = v_losses and not v_fair_short);
    v_fair_short := false;
  end loop;

  if cardinality(v_admitted) = 0 then return; end if;
  if cardinality(v_rheld) > 0 then
    -- The admitted starts join their keys' logs, which keep a minute past the window: a claim
    -- that began earlier but commits later counts from its own, earlier now.
    update worker.rate_limits r
       set starts = array(select s from unnest(r.starts) s
                           where s > v_now - make_interval(secs => r.per_ms / 1000.0) - interval '1 minute')
                    || array_fill(v_now, array[a.n]),
           updated_at = v_now
      from (select j.rate_key, count(*)::int as n from worker.jobs j
             where j.id = any (v_admitted) and j.rate_key = any (v_rheld) group by j.rate_key) a
     where r.key = a.rate_key;
  end if;
  return query select * from worker.lease_jobs(v_admitted, p_worker, p_pool, v_now);
end $function$
;
