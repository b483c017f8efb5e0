CREATE OR REPLACE FUNCTION worker.job_filter_next_ids(f worker.job_filter, p_after uuid, p_limit integer)
 RETURNS SETOF uuid
 LANGUAGE sql
 STABLE
AS $function$
  -- The next p_limit jobs (by id, after p_after) a bulk filter takes; all of them when p_limit is
  -- null (a dry run counts these). Status and type are restated outside job_filter_matches so the
  -- planner sees them and can use a status's partial index (the dead letters' for a retry).
  select j.id from worker.jobs j
   where j.status = any (f.statuses)
     and (f.type is null or j.type = f.type)
     and (p_after is null or j.id > p_after)
     and worker.job_filter_matches(j, f)
   order by j.id
   limit p_limit
$function$
;
