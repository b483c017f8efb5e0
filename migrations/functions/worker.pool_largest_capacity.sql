CREATE OR REPLACE FUNCTION worker.pool_largest_capacity(p_pool text)
 RETURNS integer
 LANGUAGE sql
 STABLE
AS $function$
  -- The most weight the pool may ever run at once: its own max_running_weight or its largest
  -- window's. A job costing more can never be claimed there. Null: no capacity row (no limit).
  select greatest(pc.max_running_weight,
                  (select max(w.max_running_weight) from worker.pool_capacity_windows w where w.pool = pc.pool))
    from worker.pool_capacity pc where pc.pool = p_pool
$function$
;
