CREATE OR REPLACE FUNCTION worker.job_tree_order(p_ids uuid[])
 RETURNS uuid[]
 LANGUAGE sql
 STABLE
AS $function$
  -- The jobs and their unfinished descendants (to depth 32) in the engine's lock order
  -- (worker.lock_job_trees): deepest first, then by parent and id within a depth (the order a
  -- batched done takes children in, worker.complete_jobs); a job both given and a descendant of
  -- another given one takes its place as the descendant.
  with recursive tree as (
    select r.id, null::uuid as parent, 0 as depth from unnest(p_ids) r(id)
    union all
    select c.child_id, c.parent_id, t.depth + 1 from tree t
      join worker.job_children c on c.parent_id = t.id and c.ended_at is null
     where t.depth < 32
  )
  select coalesce(array_agg(id order by depth desc, parent nulls first, id), '{}')
    from (select id, max(depth) as depth, min(parent::text)::uuid as parent from tree group by id) n
$function$
;
