CREATE OR REPLACE FUNCTION worker.deliver_signal(p_wait worker.job_waits, p_payload jsonb, p_event_id bigint, p_now timestamp with time zone)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
declare
  v_event jsonb := jsonb_build_object('outcome', 'signalled', 'name', p_wait.name, 'key', nullif(p_wait.key, ''),
                                      'payload', p_payload, 'at', p_now);
begin
  -- The wait ends with this event: the job (its row locked by the caller) becomes due at its
  -- resume step with the event in its checkpoint ($event), where the step reads it (ctx.event),
  -- again on a retry of that step. The wait row goes, so no second event can take it.
  delete from worker.job_waits where job_id = p_wait.job_id;
  update worker.jobs set run_at = p_now, checkpoint = checkpoint || jsonb_build_object('$event', v_event)
   where id = p_wait.job_id;
  insert into worker.job_events (job_id, at, kind, detail)
  values (p_wait.job_id, p_now, 'signalled',
          jsonb_build_object('name', p_wait.name, 'key', nullif(p_wait.key, ''), 'payload', p_payload, 'delivered', true)
          || case when p_event_id is null then '{}'::jsonb else jsonb_build_object('keptEventId', p_event_id) end);
end $function$
;
