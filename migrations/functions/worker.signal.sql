CREATE OR REPLACE FUNCTION worker.signal(p_name text, p_key text DEFAULT NULL::text, p_payload jsonb DEFAULT NULL::jsonb, p_job_id uuid DEFAULT NULL::uuid, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  v_now       timestamptz := coalesce(p_now, now());
  v_key       text := coalesce(p_key, '');
  v_job       worker.jobs;
  v_wait      worker.job_waits;
  v_candidate uuid;
  v_delivered uuid[] := '{}';
  v_kept      bigint;
begin
  -- Send an event. With p_job_id: to that job (SB404 unknown, SB409 ended), matching its wait on
  -- p_name (and p_key when given). Without: to every job waiting on (p_name, p_key). A wait that
  -- is open takes it at once (the job becomes due at its resume step); when none does, the event
  -- is kept in worker.signal_events for the next wait on it. Answers {delivered: [job ids],
  -- keptEventId: id or null}.
  perform worker.check_signal_name(p_name, p_key);
  if p_job_id is not null then
    v_job := worker.lock_job_for(p_job_id, 'signal', '{queued,running}');
    select * into v_wait from worker.job_waits w where w.job_id = p_job_id and w.name = p_name and (p_key is null or w.key = v_key);
    if found and worker.wait_is_open(v_job, v_wait, v_now) then
      perform worker.deliver_signal(v_wait, p_payload, null, v_now);
      return jsonb_build_object('delivered', jsonb_build_array(p_job_id), 'keptEventId', null);
    end if;
    insert into worker.signal_events (name, key, job_id, payload, created_at)
    values (p_name, v_key, p_job_id, p_payload, v_now) returning id into v_kept;
    insert into worker.job_events (job_id, at, kind, detail)
    values (p_job_id, v_now, 'signalled', jsonb_build_object('name', p_name, 'key', p_key, 'payload', p_payload,
                                                             'delivered', false, 'keptEventId', v_kept));
    return jsonb_build_object('delivered', '[]'::jsonb, 'keptEventId', v_kept);
  end if;

  perform worker.lock_signal_channel(p_name, v_key);
  for v_candidate in select w.job_id from worker.job_waits w where w.name = p_name and w.key = v_key order by w.job_id loop
    select * into v_job from worker.jobs where id = v_candidate for update;
    -- read again under the job's lock: a signal for that job alone may have taken it meanwhile
    select * into v_wait from worker.job_waits w where w.job_id = v_candidate and w.name = p_name and w.key = v_key;
    if found and v_job.id is not null and worker.wait_is_open(v_job, v_wait, v_now) then
      perform worker.deliver_signal(v_wait, p_payload, null, v_now);
      v_delivered := v_delivered || v_candidate;
    end if;
  end loop;
  if cardinality(v_delivered) = 0 then
    insert into worker.signal_events (name, key, job_id, payload, created_at)
    values (p_name, v_key, null, p_payload, v_now) returning id into v_kept;
  end if;
  return jsonb_build_object('delivered', to_jsonb(v_delivered), 'keptEventId', v_kept);
end $function$
;
