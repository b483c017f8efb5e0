CREATE OR REPLACE FUNCTION worker.counter_rows(p_after bigint, p_upto bigint)
 RETURNS TABLE(type text, counter text)
 LANGUAGE sql
 STABLE
AS $function$
  select coalesce(j.type, '(pruned)'),
         case when e.kind = 'retry' then 'retry' when e.kind = 'oom_killed' then 'oom_killed' else 'poison' end
    from worker.job_events e
    left join worker.jobs j on j.id = e.job_id
   where e.id > p_after and e.id <= p_upto
     and (e.kind in ('retry', 'oom_killed') or (e.kind = 'failed' and not e.detail ? 'manual'))
$function$
;
