CREATE OR REPLACE FUNCTION worker.complete_jobs(p_done jsonb, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS TABLE(id uuid)
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
 SET enable_bitmapscan TO 'off'
 SET enable_seqscan TO 'off'
 SET jit TO 'off'
AS $function$
declare
  v_done  integer;
  v_child record;
begin
  -- Jobs without a parent in one set-wise statement. Rows are found by primary key. IS NOT
  -- DISTINCT FROM states the same fence as = (status is never null) but keeps the planner off
  -- jobs_lease_idx, whose predicate = would match: with few running rows in its statistics it
  -- looks cheaper, and then walks every running job.
  return query with input as (
    select x.id, x.token, x.result from jsonb_to_recordset(p_done) as x(id uuid, token uuid, result jsonb)
  ), upd as (
    update worker.jobs j
       set status = 'done', result = coalesce(x.result, 'null'::jsonb), finished_at = coalesce(p_now, now()),
           locked_until = null, running_pool = null,
           -- the done event is held on the row with the claim's (0160): it takes only its id here
           done_event_id = nextval('worker.job_events_id_seq')
      from input x
     where j.id = any (array(select i.id from input i)) and j.id = x.id and j.lease_token = x.token
       and j.status is not distinct from 'running' and j.parent_id is null
    returning j.id
  )
  select u.id from upd u;
  get diagnostics v_done = row_count;
  if v_done = jsonb_array_length(p_done) then
    return;
  end if;
  -- Children one at a time, by parent and then id: each ending takes its join row and, when the
  -- join holds, its parent (worker.child_job_ended) right after its own row, so a batch takes the
  -- parents' rows in the engine's lock order (worker.lock_job_trees) and two batches of children
  -- of the same parents cannot take them crosswise.
  for v_child in
    select x.id, x.token, x.result
      from jsonb_to_recordset(p_done) as x(id uuid, token uuid, result jsonb)
      join worker.jobs j on j.id = x.id
     where j.parent_id is not null and j.lease_token = x.token and j.status is not distinct from 'running'
     order by j.parent_id, j.id
  loop
    update worker.jobs j
       set status = 'done', result = coalesce(v_child.result, 'null'::jsonb), finished_at = coalesce(p_now, now()),
           locked_until = null, running_pool = null, done_event_id = nextval('worker.job_events_id_seq')
     where j.id = v_child.id and j.lease_token = v_child.token and j.status is not distinct from 'running';
    if found then
      id := v_child.id;
      return next;
    end if;
  end loop;
end $function$
;
