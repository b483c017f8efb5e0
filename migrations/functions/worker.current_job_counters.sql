CREATE OR REPLACE FUNCTION worker.current_job_counters()
 RETURNS TABLE(type text, counter text, n bigint)
 LANGUAGE sql
 STABLE
AS $function$
  with w as (select last_event_id from worker.event_rollup where id = 1)
  select x.type, x.counter, sum(x.n)::bigint
    from (select c.type, c.counter, c.n from worker.job_counters c
          union all
          select t.type, t.counter, 1 from w, worker.counter_rows(w.last_event_id, 9223372036854775807) t) x
   group by 1, 2
$function$
;
