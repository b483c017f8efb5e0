CREATE OR REPLACE FUNCTION worker.complete_jobs(p_done jsonb, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS TABLE(id uuid)
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
 SET enable_bitmapscan TO 'off'
 SET enable_seqscan TO 'off'
 SET jit TO 'off'
AS $function$
begin
  return query
    with input as (
      select x.id, x.token, x.result from jsonb_to_recordset(p_done) as x(id uuid, token uuid, result jsonb)
    ), upd as (
      update worker.jobs j
         set status = 'done', result = coalesce(x.result, 'null'::jsonb), finished_at = coalesce(p_now, now()),
             locked_until = null, running_pool = null,
             -- the done event is held on the row with the claim's (0160): it takes only its id here
             done_event_id = nextval('worker.job_events_id_seq')
        from input x
       -- Rows are found by primary key. IS NOT DISTINCT FROM states the same fence as = (status is
       -- never null) but keeps the planner off jobs_lease_idx, whose predicate = would match: with
       -- few running rows in its statistics it looks cheaper, and then walks every running job.
       where j.id = any (array(select i.id from input i)) and j.id = x.id and j.lease_token = x.token
         and j.status is not distinct from 'running'
      returning j.id
    )
    select u.id from upd u;
end $function$
;
