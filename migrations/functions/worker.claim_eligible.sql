CREATE OR REPLACE FUNCTION worker.claim_eligible(j worker.jobs, p_pool text, p_types text[], p_now timestamp with time zone, p_budget integer, p_max_rank integer, p_skip_types text[], p_rate_blocked text[])
 RETURNS boolean
 LANGUAGE sql
 STABLE
AS $function$
  -- What worker.claim_jobs asks of a due queued job before it takes it, as one predicate for the
  -- fair claim's lanes (worker.fair_claim_candidates) and the unclaimed alert
  -- (worker.alert_unclaimed_jobs); test/engine/claim-eligible.test.ts checks that the claim takes
  -- exactly what it admits. The claim's own walks state it inline:
  -- Postgres inlines a SQL function only without a subquery, and this one needs three. Measured
  -- (0240): written with its subqueries moved into functions it inlined, and the common path did
  -- not move (bench:instructions 277,314 -> 276,504 per job), but those functions were then
  -- called once per row, and claiming 4,000 jobs over 40 concurrency keys (limit 5, a third
  -- with a dedupe key) took 3 to 4 times as long (about 1.3 s -> 5 s).
  select (j.pool is null or j.pool is not distinct from p_pool)
     and (p_types is null or j.type = any (p_types))
     and (p_skip_types is null or j.type <> all (p_skip_types))
     and (j.rate_key is null or j.rate_key <> all (p_rate_blocked))
     and (p_budget is null or (select w.cost <= p_budget and w.rank <= coalesce(p_max_rank, w.rank)
                                 from worker.weight_classes w where w.name = j.weight))
     and (j.concurrency_key is null or
          (select count(*) from worker.jobs r
            where r.concurrency_key = j.concurrency_key and r.status = 'running' and r.locked_until >= p_now) < j.concurrency_limit)
     and (j.dedupe_key is null or j.started_at is not null or not exists (
           select 1 from worker.jobs a
            where a.dedupe_key = j.dedupe_key and a.status in ('queued', 'running') and a.started_at is not null))
$function$
;
