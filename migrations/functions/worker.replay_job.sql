CREATE OR REPLACE FUNCTION worker.replay_job(p_id uuid, p_from_step text DEFAULT NULL::text, p_payload jsonb DEFAULT NULL::jsonb, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS worker.jobs
 LANGUAGE plpgsql
AS $function$
declare
  v_now   timestamptz := coalesce(p_now, now());
  v_step  text := coalesce(p_from_step, 'start');
  v_old   worker.jobs;
  v_type  worker.job_types;
  v_steps text[];
  v_p     record;
  v_job   worker.jobs;
begin
  -- Run an ended job again as a NEW job, the old one left as it is (its row unchanged; its
  -- history gains 'replayed_by'). From 'start' (the default) the new job begins afresh; from a
  -- later step it begins there with the old job's last checkpoint (checkpoints are merged, not
  -- kept per step), so the step finds what the steps before it saved. The step must be one the
  -- old job reached. The payload (the old one, or p_payload) is checked as an enqueue checks it;
  -- type, priority, max attempts, pool and weight are the old job's (its weight as it ended: a
  -- job escalated for memory starts where it needed to be). Dedupe and submit keys are not
  -- carried: a replay is an operator's deliberate extra run, not a push to debounce or a
  -- repeated request.
  v_old := worker.lock_job_for(p_id, 'replay', '{done,failed,cancelled,oom_killed}');
  v_steps := array(select distinct s from (
               select 'start' as s
               union all select v_old.step
               union all select e.detail->>'step' from worker.job_history e
                where e.job_id = p_id and e.kind = 'checkpoint' and e.detail ? 'step') x where s is not null order by 1);
  if not v_step = any (v_steps) then
    raise exception 'job % never reached step "%" (its steps: %)', p_id, v_step, array_to_string(v_steps, ', ')
      using errcode = 'SB400', column = 'fromStep';
  end if;
  select * into v_type from worker.job_types t where t.type = v_old.type;
  select * into v_p
    from worker.prepare_enqueue(v_old.type, coalesce(p_payload, v_old.payload), v_old.priority, null, v_old.max_attempts, null, null,
                                v_old.pool, v_old.weight,
                                -- a type that derives its key derives it again (from the new payload)
                                case when v_type.concurrency_key is null then v_old.concurrency_key end,
                                case when v_type.concurrency_key is null then v_old.concurrency_limit end,
                                null, v_now);
  select * into v_p from worker.prepare_deadline(v_p.job, v_p.request, null, null);
  v_job := jsonb_populate_record(null::worker.jobs, worker.enqueue_prepared(v_p.job, v_p.request, v_now));
  if v_step <> 'start' then
    update worker.jobs set step = v_step, checkpoint = v_old.checkpoint where id = v_job.id returning * into v_job;
  end if;
  insert into worker.job_events (job_id, at, kind, detail) values
    (v_job.id, v_now, 'replay_of', jsonb_build_object('job', p_id, 'fromStep', v_step, 'payloadEdited', p_payload is not null)),
    (p_id, v_now, 'replayed_by', jsonb_build_object('job', v_job.id, 'fromStep', v_step, 'payloadEdited', p_payload is not null));
  return v_job;
end $function$
;
