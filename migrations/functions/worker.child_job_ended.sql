CREATE OR REPLACE FUNCTION worker.child_job_ended()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
declare
  v_wait worker.child_joins;
  v_at   timestamptz := coalesce(new.finished_at, now());
begin
  -- A child job ended (finished_at set: done, failed, cancelled, oom_killed, by any path) or left
  -- its end again (an operator's requeue). Each wait that joins it and has not been joined
  -- counts it once (job_children.ended_at); the wait whose count reaches `need` is joined here
  -- and its parent, parked, becomes due at the child's end: in the child's own transaction.
  -- Lock order: the child's row (held by the caller), then the wait's row, then the parent's;
  -- worker.cancel_job locks a parent's children before the parent for the same reason.
  for v_wait in
    with counted as (
      update worker.job_children c
         set ended_at = new.finished_at
       where c.child_id = new.id
         and (c.ended_at is null) = (new.finished_at is not null)
      returning c.parent_id, c.wait_no
    )
    update worker.child_joins w
       set ended = w.ended + case when new.finished_at is null then -1 else 1 end
      from counted x
     where w.parent_id = x.parent_id and w.wait_no = x.wait_no and w.joined_at is null
    returning w.*
  loop
    continue when new.finished_at is null or v_wait.ended < v_wait.need;
    update worker.child_joins set joined_at = v_at, joined_by = new.id
     where parent_id = v_wait.parent_id and wait_no = v_wait.wait_no;
    with woken as (
      update worker.jobs p set run_at = v_at
       where p.id = v_wait.parent_id and p.status = 'queued' and p.run_at > v_at
      returning p.id, p.step)
    insert into worker.job_events (job_id, at, kind, detail)
    select id, v_at, 'resumed', jsonb_build_object('step', step, 'children', jsonb_build_object(
             'wait', v_wait.wait_no, 'ended', v_wait.ended, 'total', v_wait.total, 'join', v_wait.join_kind, 'by', new.id))
      from woken;
  end loop;
  return null;
end $function$
;
