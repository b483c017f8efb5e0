CREATE OR REPLACE FUNCTION worker.wait_for(p_id uuid, p_token uuid, p_name text, p_key text, p_step text, p_timeout_ms bigint, p_checkpoint jsonb, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS text
 LANGUAGE plpgsql
AS $function$
declare
  v_now     timestamptz := coalesce(p_now, now());
  v_key     text := coalesce(p_key, '');
  v_timeout timestamptz;
  v_job     worker.jobs;
  v_old     worker.jobs;
  v_wait    worker.job_waits;
  v_kept    worker.signal_events;
begin
  -- Settle a step that ends waiting for an event (fenced by the lease token, like every settle):
  -- the checkpoint merged, the job queued at p_step with run_at = the timeout (infinity without
  -- one), so claims pass it by until an event or the timeout makes it due. An event kept for it
  -- (sent to this job, or to (p_name, p_key) while nobody waited) is taken here, oldest first.
  -- Answers 'waiting', 'signalled' (a kept event was taken: due now), 'cancelling' (a cancel is
  -- pending: due now, no wait), or null when the lease was lost (nothing written).
  -- The history gains one row, the waiting event, carrying the events that end with this claim
  -- (0260): the claim and the timed-out wait's end the row held ($wait.timedOutEvent), under the
  -- ids they took, and the checkpoint. The row lets go of them (claimed_event_id, $wait), so the
  -- trigger that writes out an ended claim leaves them to this row.
  perform worker.check_signal_name(p_name, p_key);
  if p_step is null or btrim(p_step) = '' or length(p_step) > 200 then
    raise exception 'step must be 1 to 200 characters, not blank' using errcode = 'SB400', column = 'step';
  end if;
  if p_timeout_ms is not null and p_timeout_ms not between 1 and 2592000000 then
    raise exception 'timeoutMs must be from 1 to 2592000000 (30 days), got %', p_timeout_ms using errcode = 'SB400', column = 'timeoutMs';
  end if;
  v_timeout := v_now + make_interval(secs => p_timeout_ms / 1000.0);
  -- channel before job: the order worker.signal takes them in
  perform worker.lock_signal_channel(p_name, v_key);
  -- the row as the claim left it (the lock the update takes anyway), for the events it carries
  select * into v_old from worker.jobs where id = p_id and lease_token = p_token and status = 'running' for no key update;
  if not found then
    return null;
  end if;
  update worker.jobs
     set status = 'queued', step = p_step, attempts = 0, locked_until = null, running_pool = null,
         claimed_event_id = null,
         checkpoint = (checkpoint - '$wait' - '$event') || coalesce(p_checkpoint, '{}'::jsonb)
                      || jsonb_build_object('$wait', jsonb_build_object('name', p_name, 'key', p_key, 'step', p_step,
                                                                       'since', v_now, 'timeoutAt', v_timeout)),
         run_at = case when cancel_requested_at is not null then v_now else coalesce(v_timeout, 'infinity') end
   where id = p_id
  returning * into v_job;
  insert into worker.job_events (job_id, at, kind, detail, carried)
  select p_id, v_now, 'waiting', jsonb_build_object('name', p_name, 'key', p_key, 'step', p_step, 'timeoutAt', v_timeout),
         jsonb_agg(h.event order by (h.event->>'id')::bigint)
    from (select jsonb_build_object('id', v_old.claimed_event_id, 'at', v_old.claimed_at, 'kind', 'claimed',
                   'detail', worker.claimed_event_detail(v_old.locked_by, v_old.lease_token, v_old.attempts, v_old.step,
                                                         v_old.claimed_at, v_old.type))
           where v_old.claimed_event_id is not null
          union all
          select jsonb_build_object('kind', 'wait_timed_out') || h.event
            from (select v_old.checkpoint #> '{$wait,timedOutEvent}') h(event)
           where (h.event->>'id')::bigint > v_old.claimed_event_id
          union all
          -- its id is taken before the waiting row's own
          select jsonb_build_object('id', nextval('worker.job_events_id_seq'), 'at', v_now, 'kind', 'checkpoint',
                                    'detail', jsonb_build_object('step', p_step, 'runAt', v_job.run_at))) h(event);
  if v_job.cancel_requested_at is not null then
    return 'cancelling';
  end if;
  insert into worker.job_waits (job_id, name, key, step, since, timeout_at)
  values (p_id, p_name, v_key, p_step, v_now, v_timeout)
  on conflict (job_id) do update set name = excluded.name, key = excluded.key, step = excluded.step,
                                     since = excluded.since, timeout_at = excluded.timeout_at
  returning * into v_wait;
  -- an event sent to this job first, then one sent to the pair
  delete from worker.signal_events e
   where e.id = (select k.id from worker.signal_events k
                  where k.job_id = p_id and k.name = p_name and (k.key = '' or k.key = v_key)
                  order by k.id limit 1)
  returning * into v_kept;
  if not found then
    delete from worker.signal_events e
     where e.id = (select k.id from worker.signal_events k
                    where k.job_id is null and k.name = p_name and k.key = v_key order by k.id limit 1)
    returning * into v_kept;
  end if;
  if v_kept.id is not null then
    perform worker.deliver_signal(v_wait, v_kept.payload, v_kept.id, v_now);
    return 'signalled';
  end if;
  return 'waiting';
end $function$
;
