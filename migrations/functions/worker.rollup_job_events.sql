CREATE OR REPLACE FUNCTION worker.rollup_job_events(p_lag_ms bigint DEFAULT 60000, p_limit integer DEFAULT 100000, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS integer
 LANGUAGE plpgsql
AS $function$
declare
  v_now   timestamptz := coalesce(p_now, now());
  v_from  bigint;
  v_young bigint;
  v_upto  bigint;
  v_ffrom timestamptz;             -- the done rows' cursor (0160): finished_at already folded
  v_fupto timestamptz;
  v_rows  int := 0;                -- done rows folded
  v_n     int;                     -- events folded
begin
  select last_event_id, last_finished_at into v_from, v_ffrom from worker.event_rollup where id = 1 for update skip locked;
  if not found then return 0; end if;
  -- the dashboard's per-minute steps are kept 7 days (0230): a range of their primary key
  delete from worker.step_minutes where minute < v_now - interval '7 days';

  -- Completed steps the job rows hold: those finished before the lag, at most about p_limit rows
  -- (the cut is a finished_at, and rows finished at that same instant come along).
  v_fupto := v_now - make_interval(secs => p_lag_ms / 1000.0);
  v_fupto := least(v_fupto, (select j.finished_at from worker.jobs j
                              where j.finished_at > v_ffrom and j.finished_at <= v_fupto
                              order by j.finished_at offset greatest(p_limit - 1, 0) limit 1));
  if v_fupto > v_ffrom then
    with r as (select * from worker.done_step_rows(v_ffrom, v_fupto)),
    ins as (
      insert into worker.step_stats (type, outcome, bucket, steps, seconds)
      select r.type, r.outcome, r.bucket, count(*), sum(r.seconds) from r group by 1, 2, 3
      on conflict (type, outcome, bucket)
      do update set steps = worker.step_stats.steps + excluded.steps, seconds = worker.step_stats.seconds + excluded.seconds),
    per_minute as (
      insert into worker.step_minutes (minute, type, outcome, bucket, steps, seconds)
      select date_trunc('minute', r.ended_at), r.type, r.outcome, r.bucket, count(*), sum(r.seconds) from r group by 1, 2, 3, 4
      on conflict (minute, type, outcome, bucket)
      do update set steps = worker.step_minutes.steps + excluded.steps, seconds = worker.step_minutes.seconds + excluded.seconds)
    select count(*) into v_rows from r;
    update worker.event_rollup set last_finished_at = v_fupto, rolled_at = v_now where id = 1;
  end if;

  select min(e.id) into v_young from worker.job_events e
   where e.id > v_from and e.at >= v_now - make_interval(secs => p_lag_ms / 1000.0);
  select coalesce(v_young - 1, max(e.id), v_from) into v_upto from worker.job_events e where e.id > v_from;
  -- At most p_limit events: the ids have gaps (a rolled-back insert's, and since 0160 the ids the
  -- rows' held events took), so the cut is the p_limit-th event, not an id span.
  v_upto := coalesce((select e.id from worker.job_events e where e.id > v_from and e.id <= v_upto
                       order by e.id offset greatest(p_limit - 1, 0) limit 1), v_upto);
  if v_upto <= v_from then return v_rows; end if;
  -- the events, with those a row carries (0260)
  select coalesce(sum(1 + coalesce(jsonb_array_length(e.carried), 0)), 0) into v_n
    from worker.job_events e where e.id > v_from and e.id <= v_upto;

  with s as (select * from worker.step_rows(v_from, v_upto)),
  totals as (
    insert into worker.step_stats (type, outcome, bucket, steps, seconds)
    select s.type, s.outcome, s.bucket, count(*), sum(s.seconds) from s group by 1, 2, 3
    on conflict (type, outcome, bucket)
    do update set steps = worker.step_stats.steps + excluded.steps, seconds = worker.step_stats.seconds + excluded.seconds)
  -- the same steps by the minute they ended, for the dashboard's charts (0230)
  insert into worker.step_minutes (minute, type, outcome, bucket, steps, seconds)
  select date_trunc('minute', s.ended_at), s.type, s.outcome, s.bucket, count(*), sum(s.seconds) from s group by 1, 2, 3, 4
  on conflict (minute, type, outcome, bucket)
  do update set steps = worker.step_minutes.steps + excluded.steps, seconds = worker.step_minutes.seconds + excluded.seconds;

  insert into worker.job_counters (type, counter, n)
  select r.type, r.counter, count(*) from worker.counter_rows(v_from, v_upto) r group by 1, 2
  on conflict (type, counter) do update set n = worker.job_counters.n + excluded.n;

  update worker.event_rollup set last_event_id = v_upto, rolled_at = v_now where id = 1;
  return v_n + v_rows;
end $function$
;
