CREATE OR REPLACE FUNCTION worker.cancel_children(p_id uuid, p_reason text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS integer
 LANGUAGE plpgsql
AS $function$
declare
  v_child record;
  v_n     integer := 0;
begin
  -- Cancel a parent's unfinished children (and theirs) through worker.cancel_job, so a started
  -- child's cancel hook runs; called by worker.cancel_job for the parent, which has locked the
  -- whole tree already (worker.lock_job_trees), so nothing here waits for a lock.
  for v_child in
    select j.id, j.status from worker.job_children c join worker.jobs j on j.id = c.child_id
     where c.parent_id = p_id and c.ended_at is null
     order by j.id
  loop
    continue when v_child.status not in ('queued', 'running');
    perform worker.cancel_job(v_child.id, 'parent ' || p_id || ' cancelled: ' || p_reason, p_now);
    v_n := v_n + 1;
  end loop;
  return v_n;
end $function$
;
