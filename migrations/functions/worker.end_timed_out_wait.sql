CREATE OR REPLACE FUNCTION worker.end_timed_out_wait(p_id uuid, p_token uuid, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  v_now  timestamptz := coalesce(p_now, now());
  v_job  worker.jobs;
  v_wait jsonb;
  v_row  worker.job_waits;
  v_event jsonb;
begin
  -- A job claimed at its wait's step with no event: its timeout passed (or an operator made it
  -- due). Fenced by the lease like a settle, this ends the wait with the timeout outcome: the wait
  -- row goes (an event from now on is kept for the next wait) and the outcome is written to the
  -- checkpoint ($event), so a retry of the step sees the same one. null when the lease was lost.
  -- The wait_timed_out event is held on the row, in the wait's own record ($wait.timedOutEvent,
  -- 0260), under the id it takes here: the settle that ends this claim writes it, carried by its
  -- wait's one row, or as a row of its own for any other ending; worker.job_history shows it
  -- meanwhile. (In the checkpoint, not a column of its own: a column costs every claim.)
  select * into v_job from worker.jobs where id = p_id and lease_token = p_token and status = 'running' for update;
  if not found then
    return null;
  end if;
  if v_job.checkpoint ? '$event' then
    return v_job.checkpoint -> '$event';
  end if;
  v_wait := v_job.checkpoint -> '$wait';
  if v_wait is null then
    return null;
  end if;
  delete from worker.job_waits where job_id = p_id returning * into v_row;
  v_event := jsonb_build_object('outcome', 'timed_out', 'name', v_wait -> 'name', 'key', v_wait -> 'key', 'at', v_now);
  update worker.jobs
     set checkpoint = checkpoint || jsonb_build_object(
           '$event', v_event,
           '$wait', v_wait || jsonb_build_object('timedOutEvent', jsonb_build_object(
             'id', nextval('worker.job_events_id_seq'), 'at', v_now,
             'detail', jsonb_build_object('name', v_wait -> 'name', 'key', v_wait -> 'key', 'step', v_job.step,
                                          'timeoutAt', v_wait -> 'timeoutAt')
                       -- due before its timeout: an operator resumed or rescheduled it
                       || case when v_row.timeout_at is null or v_row.timeout_at > v_now then jsonb_build_object('early', true) else '{}'::jsonb end)))
   where id = p_id;
  return v_event;
end $function$
;
