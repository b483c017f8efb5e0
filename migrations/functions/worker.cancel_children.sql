CREATE OR REPLACE FUNCTION worker.cancel_children(p_id uuid, p_reason text, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS integer
 LANGUAGE plpgsql
AS $function$
declare
  v_child record;
  v_n     integer := 0;
begin
  -- Cancel a parent's unfinished children (and theirs) through worker.cancel_job, so a started
  -- child's cancel hook runs; called by worker.cancel_job for the parent. Every job of the tree
  -- is locked first, deepest first: a child's settle holds the child's row and then locks its
  -- parent's (worker.child_job_ended), so locking the other way round could deadlock.
  for v_child in
    with recursive tree as (
      select c.child_id, 1 as depth from worker.job_children c where c.parent_id = p_id and c.ended_at is null
      union all
      select c.child_id, t.depth + 1 from tree t
        join worker.job_children c on c.parent_id = t.child_id and c.ended_at is null
       where t.depth < 32
    ), nodes as (
      select child_id, max(depth) as depth, bool_or(depth = 1) as direct from tree group by child_id
    )
    select j.id, j.status, n.direct from nodes n join worker.jobs j on j.id = n.child_id
     order by n.depth desc, j.id
       for update of j
  loop
    continue when not v_child.direct or v_child.status not in ('queued', 'running');
    perform worker.cancel_job(v_child.id, 'parent ' || p_id || ' cancelled: ' || p_reason, p_now);
    v_n := v_n + 1;
  end loop;
  return v_n;
end $function$
;
