CREATE OR REPLACE FUNCTION worker.step_rows(p_after bigint, p_upto bigint)
 RETURNS TABLE(type text, outcome text, bucket smallint, seconds double precision, ended_at timestamp with time zone)
 LANGUAGE sql
 STABLE
AS $function$
  select coalesce(j.type, '(pruned)'),
         case e.kind when 'done' then 'done' when 'checkpoint' then 'continued' when 'retry' then 'retried'
                     when 'failed' then 'failed' when 'cancelled' then 'cancelled'
                     when 'lease_released' then 'released' else 'lost' end,
         (select count(*) from unnest(worker.step_duration_bounds()) b where b < extract(epoch from e.at - c.at))::smallint,
         greatest(extract(epoch from e.at - c.at)::float8, 0),
         e.at
    from worker.job_events e
    join lateral (select c.id, c.at from worker.job_events c
                   where c.job_id = e.job_id and c.kind = 'claimed' and c.id < e.id
                   order by c.id desc limit 1) c on true
    left join worker.jobs j on j.id = e.job_id
   where e.id > p_after and e.id <= p_upto
     and e.kind in ('done', 'checkpoint', 'retry', 'failed', 'cancelled', 'lease_released', 'lease_expired')
     and not exists (select 1 from worker.job_events x
                      where x.job_id = e.job_id and x.id > c.id and x.id < e.id
                        and x.kind in ('done', 'checkpoint', 'retry', 'failed', 'cancelled', 'lease_released', 'lease_expired'))
$function$
;
