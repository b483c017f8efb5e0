CREATE OR REPLACE FUNCTION worker.rate_limit_room(r worker.rate_limits, p_now timestamp with time zone)
 RETURNS integer
 LANGUAGE sql
 STABLE
AS $function$
  -- How many steps of the key may start at p_now: none while the key is paused, else the limit
  -- less the starts in the window ending at p_now. Starts stamped after p_now count too: a claim
  -- whose transaction began earlier may commit after one that began later, and counting them
  -- keeps every window of per_ms at most max_starts whatever order the claims commit in.
  select case when r.paused_until > p_now then 0
              else r.max_starts - (select count(*)::int from unnest(r.starts) s
                                    where s >= p_now - make_interval(secs => r.per_ms / 1000.0)) end
$function$
;
