CREATE OR REPLACE FUNCTION worker.current_step_stats()
 RETURNS TABLE(type text, outcome text, bucket smallint, steps bigint, seconds double precision)
 LANGUAGE sql
 STABLE
AS $function$
  with w as (select last_event_id, last_finished_at from worker.event_rollup where id = 1)
  select x.type, x.outcome, x.bucket, sum(x.steps)::bigint, sum(x.seconds)::float8
    from (select s.type, s.outcome, s.bucket, s.steps, s.seconds from worker.step_stats s
          union all
          select t.type, t.outcome, t.bucket, 1, t.seconds
            from w, worker.step_rows(w.last_event_id, 9223372036854775807) t
          union all
          select d.type, d.outcome, d.bucket, 1, d.seconds
            from w, worker.done_step_rows(w.last_finished_at, 'infinity') d) x
   group by 1, 2, 3
$function$
;
