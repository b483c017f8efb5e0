CREATE OR REPLACE FUNCTION worker.lock_job_trees(p_ids uuid[])
 RETURNS SETOF uuid
 LANGUAGE plpgsql
AS $function$
declare
  v_tree  uuid[];
  v_again uuid[];
begin
  -- The engine's lock order for a change that reaches a job's children (a cancel, one or in
  -- bulk): every unfinished descendant of the jobs first, deepest first, by parent and id within a
  -- depth, then the jobs themselves by id, in one statement. A child's settle holds the child's
  -- row and then locks its parent's (worker.child_job_ended), and a batched settle holds the
  -- children of several parents before it locks any of them, so every lock of a parent must come
  -- after the locks of all the children it will wait for. A child spawned between the read of
  -- the tree and the lock (by a settle that held its parent meanwhile) would be locked after its
  -- parent: then the locks are let go and taken again. Answers the locked ids: the jobs that
  -- exist, descendants first.
  loop
    begin
      v_tree := worker.job_tree_order(p_ids);
      perform 1 from worker.jobs j join unnest(v_tree) with ordinality as t(id, o) on j.id = t.id order by t.o for update of j;
      v_again := worker.job_tree_order(p_ids);
      if v_again = v_tree then
        return query select t.id from unnest(v_tree) t(id) where exists (select 1 from worker.jobs j where j.id = t.id);
        return;
      end if;
      raise exception 'the tree grew while it was locked' using errcode = 'SB4TG';
    exception when sqlstate 'SB4TG' then
      null; -- the block's locks are released with it: take them again in order
    end;
  end loop;
end $function$
;
