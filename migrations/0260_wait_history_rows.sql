-- A step resumed by its wait's timeout that waits again (the build job's poll loop) wrote four
-- event rows per poll: its claim (written out because the claim ended other than done), the
-- wait_timed_out event, the checkpoint and the waiting event. A build polled every two seconds
-- grew a history of a hundred rows a minute, each a heap row and two btree entries that the
-- rollups read and the prune deletes. Now such a poll writes one row; the history reads the same.
--
-- The timed-out event is held on the job row while the claim runs, as the claim itself is
-- (0160): in the wait's record in the checkpoint ($wait.timedOutEvent: {id, at, detail}, its id
-- taken from the events' sequence when the wait ended; not a column, which would cost every
-- claim and completion). A claim that ends in a wait writes one row, the waiting event, which
-- carries the events that ended with it (carried: [{id, at, kind, detail}], ids below the row's
-- own, taken when each happened): the claim, the timed-out event and the checkpoint. Any other
-- ending of the claim writes the timed-out event out as a row of its own, under its id, as it
-- writes the claim.
alter table worker.job_events add column carried jsonb;

-- One history: the event rows, the events they carry, and the events the rows hold. A carried or
-- held event is shown from event retention's mark on, as a row-held one is: a pruned history
-- stays a suffix. A job row holds its timed-out event while running or done, for the claim it
-- holds (an id above the claim's: a later claim leaves it behind), until it is written out.
create or replace view worker.job_history as
  select e.id, e.job_id, e.at, e.kind, e.detail from worker.job_events e
  union all
  select (c.event->>'id')::bigint, e.job_id, (c.event->>'at')::timestamptz, c.event->>'kind', c.event->'detail'
    from worker.job_events e cross join lateral jsonb_array_elements(e.carried) c(event)
   where e.carried is not null and (c.event->>'at')::timestamptz >= (select r.kept_from from worker.event_retention r)
  union all
  select j.enqueued_event_id, j.id, j.created_at, 'enqueued', jsonb_build_object('batch', true, 'runAt', j.run_at)
    from worker.jobs j
   where j.enqueued_event_id is not null and j.created_at >= (select r.kept_from from worker.event_retention r)
     and not exists (select 1 from worker.job_events x where x.id = j.enqueued_event_id)
  union all
  select j.claimed_event_id, j.id, j.claimed_at, 'claimed',
         worker.claimed_event_detail(j.locked_by, j.lease_token, j.attempts, j.step, j.claimed_at, j.type)
    from worker.jobs j
   where j.claimed_event_id is not null and j.status in ('running', 'done') and j.claimed_at >= (select r.kept_from from worker.event_retention r)
     and not exists (select 1 from worker.job_events x where x.id = j.claimed_event_id)
  union all
  select (t.event->>'id')::bigint, j.id, (t.event->>'at')::timestamptz, 'wait_timed_out', t.event->'detail'
    from worker.jobs j cross join lateral (select j.checkpoint #> '{$wait,timedOutEvent}') t(event)
   where j.status in ('running', 'done') and (t.event->>'id')::bigint > j.claimed_event_id
     and (t.event->>'at')::timestamptz >= (select r.kept_from from worker.event_retention r)
     and not exists (select 1 from worker.job_events x where x.id = (t.event->>'id')::bigint)
  union all
  select j.done_event_id, j.id, j.finished_at, 'done', jsonb_build_object('attempt', j.attempts)
    from worker.jobs j
   where j.done_event_id is not null and j.status = 'done' and j.finished_at >= (select r.kept_from from worker.event_retention r)
     and not exists (select 1 from worker.job_events x where x.id = j.done_event_id);
