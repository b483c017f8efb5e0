CREATE OR REPLACE FUNCTION worker.step_rows(p_after bigint, p_upto bigint)
 RETURNS TABLE(type text, outcome text, bucket smallint, seconds double precision, ended_at timestamp with time zone)
 LANGUAGE sql
 STABLE
AS $function$
  -- The steps that ended in the event rows p_after < id <= p_upto, timed from their claims. A
  -- row that carries events (0260: a wait's row carries its claim and its checkpoint) ends the
  -- step it carries, timed from the claim it carries (else from the claim before it, as an
  -- ending row is); a carried ending lies between an earlier claim and a later ending row, so
  -- that ending row ended no step of its own.
  select coalesce(j.type, '(pruned)'),
         case s.kind when 'done' then 'done' when 'checkpoint' then 'continued' when 'retry' then 'retried'
                     when 'failed' then 'failed' when 'cancelled' then 'cancelled'
                     when 'lease_released' then 'released' else 'lost' end,
         (select count(*) from unnest(worker.step_duration_bounds()) b where b < extract(epoch from s.at - c.at))::smallint,
         greatest(extract(epoch from s.at - c.at)::float8, 0),
         s.at
    from worker.job_events e
    cross join lateral (select e.id, e.at, e.kind, null::timestamptz
                         where e.kind in ('done', 'checkpoint', 'retry', 'failed', 'cancelled', 'lease_released', 'lease_expired')
                        union all
                        select (x.event->>'id')::bigint, (x.event->>'at')::timestamptz, x.event->>'kind',
                               (select (k.event->>'at')::timestamptz from jsonb_array_elements(e.carried) k(event)
                                 where k.event->>'kind' = 'claimed')
                          from jsonb_array_elements(e.carried) x(event)
                         where x.event->>'kind' in ('done', 'checkpoint', 'retry', 'failed', 'cancelled', 'lease_released', 'lease_expired')
                       ) s(id, at, kind, claim_at)
    join lateral (select s.claim_at as at where s.claim_at is not null
                  union all
                  select c.at
                    from (select c.id, c.at from worker.job_events c
                           where s.claim_at is null and c.job_id = e.job_id and c.kind = 'claimed' and c.id < s.id
                           order by c.id desc limit 1) c
                   where not exists (select 1 from worker.job_events x
                                      where x.job_id = e.job_id and x.id > c.id and x.id < s.id
                                        and (x.kind in ('done', 'checkpoint', 'retry', 'failed', 'cancelled', 'lease_released', 'lease_expired')
                                             or x.carried is not null))) c on true
    left join worker.jobs j on j.id = e.job_id
   where e.id > p_after and e.id <= p_upto
     and (e.kind in ('done', 'checkpoint', 'retry', 'failed', 'cancelled', 'lease_released', 'lease_expired') or e.carried is not null)
$function$
;
