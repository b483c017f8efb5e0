CREATE OR REPLACE FUNCTION worker.write_row_held_events()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
  -- The row stopped holding its claim (a claim that ended other than done) or its claim and done
  -- event (a done job that left done): they become event rows under the ids the claim and the
  -- completion took, so the job's history (worker.job_history) reads as it did. The row keeps the
  -- ids until a claim or a completion takes new ones; the view shows them only while the status
  -- says the row holds them, and an id written out already is not written again.
  if old.claimed_event_id is not null then
    insert into worker.job_events (id, job_id, at, kind, detail) overriding system value
    values (old.claimed_event_id, old.id, old.claimed_at, 'claimed',
            worker.claimed_event_detail(old.locked_by, old.lease_token, old.attempts, old.step, old.claimed_at, old.type))
    on conflict (id) do nothing;
  end if;
  if old.status = 'done' and old.done_event_id is not null then
    insert into worker.job_events (id, job_id, at, kind, detail) overriding system value
    values (old.done_event_id, old.id, old.finished_at, 'done', jsonb_build_object('attempt', old.attempts))
    on conflict (id) do nothing;
  end if;
  return null;
end $function$
;
