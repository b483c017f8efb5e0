CREATE OR REPLACE FUNCTION worker.write_row_held_events()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
  -- The row stopped holding its enqueued event (its run_at changed), its claim (a claim that
  -- ended other than done) or its claim and done event (a done job that left done): they become
  -- event rows under the ids they took, so the job's history (worker.job_history) reads as it
  -- did. The end of a wait that timed out, held in the wait's record ($wait.timedOutEvent, 0260),
  -- goes with the claim it ended in.
  -- The row keeps the ids until a claim or a completion takes new ones; the view shows them
  -- only while the row holds them, and an id written out already is not written again. One
  -- older than event retention's mark is pruned already: it is not written. A statement that
  -- lets go of the claim itself (claimed_event_id set to null: worker.wait_for) wrote the claim's
  -- events in its own row.
  insert into worker.job_events (id, job_id, at, kind, detail) overriding system value
  select h.id, old.id, h.at, h.kind, h.detail
    from (select old.enqueued_event_id, old.created_at, 'enqueued', jsonb_build_object('batch', true, 'runAt', old.run_at)
           where old.enqueued_event_id is not null and old.run_at is distinct from new.run_at
          union all
          select c.id, c.at, c.kind, c.detail
            from (select old.claimed_event_id, old.claimed_at, 'claimed',
                         worker.claimed_event_detail(old.locked_by, old.lease_token, old.attempts, old.step, old.claimed_at, old.type)
                  union all
                  select (t.event->>'id')::bigint, (t.event->>'at')::timestamptz, 'wait_timed_out', t.event->'detail'
                    from (select old.checkpoint #> '{$wait,timedOutEvent}') t(event)
                   where (t.event->>'id')::bigint > old.claimed_event_id) c(id, at, kind, detail)
           where old.claimed_event_id is not null and new.claimed_event_id = old.claimed_event_id
             and ((old.status = 'running' and new.status not in ('running', 'done')) or (old.status = 'done' and new.status <> 'done'))
          union all
          select old.done_event_id, old.finished_at, 'done', jsonb_build_object('attempt', old.attempts)
           where old.done_event_id is not null and old.status = 'done' and new.status <> 'done') h(id, at, kind, detail),
         worker.event_retention r
   where h.at >= r.kept_from
   order by h.id
  on conflict (id) do nothing;
  return null;
end $function$
;
