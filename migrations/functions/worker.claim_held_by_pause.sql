CREATE OR REPLACE FUNCTION worker.claim_held_by_pause(j worker.jobs, p_now timestamp with time zone)
 RETURNS boolean
 LANGUAGE sql
 STABLE
AS $function$
  -- A queued job no claim takes because someone said so (0240): an operator paused its type or
  -- the pool it is pinned to, or its provider paused its rate key (a 429). It waits for a
  -- reason, so worker.alert_unclaimed_jobs does not count it as unclaimed. (An unpinned job in a
  -- paused pool's queue can still run in another pool: it is not held.)
  select exists (select 1 from worker.pauses p where p.kind = 'type' and p.name = j.type)
      or (j.pool is not null and exists (select 1 from worker.pauses p where p.kind = 'pool' and p.name = j.pool))
      or (j.rate_key is not null and exists (select 1 from worker.rate_limits r where r.key = j.rate_key and r.paused_until > p_now))
$function$
;
