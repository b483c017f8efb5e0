CREATE OR REPLACE FUNCTION worker.fair_claim_candidates(p_pool text, p_types text[], p_limit integer, p_now timestamp with time zone, p_budget integer, p_max_rank integer, p_skip_types text[], p_rate_blocked text[])
 RETURNS uuid[]
 LANGUAGE sql
 STABLE
 SET enable_bitmapscan TO 'off'
 SET enable_seqscan TO 'off'
 SET jit TO 'off'
AS $function$
  -- A claim's candidates when due jobs carry fairness keys, in turn order: each key is a lane
  -- (the jobs without a key one more), a lane's n-th job in (priority, run_at) order takes turn
  -- n / weight, and the batch is the first p_limit turns. So a key with 10,000 due jobs and a key
  -- with one share the first turn, whatever their order by run_at. A lane gives at most
  -- p_limit / lanes + 1 jobs (times its weight): enough for its turns in this batch, so a claim
  -- reads a bounded number of each key's rows. The keys are found by a skip scan of
  -- jobs_fair_idx: one probe per key with queued jobs.
  with recursive keys(key) as (
    (select j.fair_key from worker.jobs j
      where j.status = 'queued' and j.fair_key is not null order by j.fair_key limit 1)
    union all
    select (select j.fair_key from worker.jobs j
             where j.status = 'queued' and j.fair_key > k.key order by j.fair_key limit 1)
      from keys k where k.key is not null
  ), lanes as (
    select k.key, coalesce(w.weight, 1) as weight
      from keys k left join worker.fair_weights w on w.key = k.key
     where k.key is not null
  ), quota as (
    select p_limit / (count(*) + 1) + 1 as per_turn from lanes
  ), turns as (
    select l.id, l.priority, l.run_at, l.n::float8 / ln.weight as turn
      from lanes ln cross join quota q
      cross join lateral (
        select j.id, j.priority, j.run_at, row_number() over (order by j.priority, j.run_at) as n
          from worker.jobs j
         where j.status = 'queued' and j.fair_key = ln.key and j.run_at + interval '0' <= p_now
           and worker.claim_eligible(j, p_pool, p_types, p_now, p_budget, p_max_rank, p_skip_types, p_rate_blocked)
         order by j.priority, j.run_at
         limit least(p_limit, q.per_turn * ln.weight)) l
    union all
    select u.id, u.priority, u.run_at, u.n::float8
      from quota q
      cross join lateral (
        select j.id, j.priority, j.run_at, row_number() over (order by j.priority, j.run_at) as n
          from worker.jobs j
         where j.status = 'queued' and j.fair_key is null and j.run_at + interval '0' <= p_now
           and worker.claim_eligible(j, p_pool, p_types, p_now, p_budget, p_max_rank, p_skip_types, p_rate_blocked)
         order by j.priority, j.run_at
         limit least(p_limit, q.per_turn)) u
  )
  select coalesce(array_agg(c.id order by c.turn, c.priority, c.run_at), '{}')
    from (select t.id, t.turn, t.priority, t.run_at from turns t order by t.turn, t.priority, t.run_at limit p_limit) c
$function$
;
