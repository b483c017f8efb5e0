CREATE OR REPLACE FUNCTION worker.pool_limit_at(p_pool text, p_at timestamp with time zone)
 RETURNS integer
 LANGUAGE sql
 STABLE
AS $function$
  -- The pool's max_running_weight at p_at: its window in force then (UTC time of day; windows
  -- never overlap), else its own. Null: the pool has no capacity row (no limit).
  select coalesce(
           (select w.max_running_weight from worker.pool_capacity_windows w
             where w.pool = pc.pool and worker.in_time_window((p_at at time zone 'UTC')::time, w.starts, w.ends)),
           pc.max_running_weight)
    from worker.pool_capacity pc where pc.pool = p_pool
$function$
;
