CREATE OR REPLACE FUNCTION worker.done_step_rows(p_after timestamp with time zone, p_upto timestamp with time zone)
 RETURNS TABLE(type text, outcome text, bucket smallint, seconds double precision, ended_at timestamp with time zone)
 LANGUAGE sql
 STABLE
AS $function$
  -- The completed steps whose claim and done event the job row holds (0160), finished in
  -- (p_after, p_upto]: a range of jobs_finished_idx. Done events written as rows (a legacy row,
  -- or one an operator requeued since) are worker.step_rows' to count.
  select j.type, 'done',
         (select count(*) from unnest(worker.step_duration_bounds()) b where b < extract(epoch from j.finished_at - j.claimed_at))::smallint,
         greatest(extract(epoch from j.finished_at - j.claimed_at)::float8, 0),
         j.finished_at
    from worker.jobs j
   where j.finished_at > p_after and j.finished_at <= p_upto
     and j.status = 'done' and j.done_event_id is not null
$function$
;
