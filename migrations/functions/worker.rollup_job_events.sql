CREATE OR REPLACE FUNCTION worker.rollup_job_events(p_lag_ms bigint DEFAULT 60000, p_limit integer DEFAULT 100000, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS integer
 LANGUAGE plpgsql
AS $function$
declare
  v_now   timestamptz := coalesce(p_now, now());
  v_from  bigint;
  v_young bigint;
  v_upto  bigint;
begin
  select last_event_id into v_from from worker.event_rollup where id = 1 for update skip locked;
  if not found then return 0; end if;
  select min(e.id) into v_young from worker.job_events e
   where e.id > v_from and e.at >= v_now - make_interval(secs => p_lag_ms / 1000.0);
  select coalesce(v_young - 1, max(e.id), v_from) into v_upto from worker.job_events e where e.id > v_from;
  v_upto := least(v_upto, v_from + p_limit);
  if v_upto <= v_from then return 0; end if;

  insert into worker.step_stats (type, outcome, bucket, steps, seconds)
  select s.type, s.outcome, s.bucket, count(*), sum(s.seconds) from worker.step_rows(v_from, v_upto) s
   group by 1, 2, 3
  on conflict (type, outcome, bucket)
  do update set steps = worker.step_stats.steps + excluded.steps, seconds = worker.step_stats.seconds + excluded.seconds;

  insert into worker.job_counters (type, counter, n)
  select r.type, r.counter, count(*) from worker.counter_rows(v_from, v_upto) r group by 1, 2
  on conflict (type, counter) do update set n = worker.job_counters.n + excluded.n;

  update worker.event_rollup set last_event_id = v_upto, rolled_at = v_now where id = 1;
  return v_upto - v_from;
end $function$
;
