CREATE OR REPLACE FUNCTION worker.enqueue_prepared(p_job worker.jobs, p_request jsonb, p_now timestamp with time zone)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  v_row worker.jobs;
  v_key worker.submit_keys;
  v_old uuid;
begin
  -- The claim locks a job's concurrency-key row; creating it with the job means a claim never has
  -- to create one, so it can avoid waiting where a wait could deadlock (0063).
  if p_job.concurrency_key is not null then
    insert into worker.concurrency_keys (key) values (p_job.concurrency_key) on conflict do nothing;
  end if;

  -- Reserve the submit key before superseding anything. The insert waits while another
  -- transaction holds the key uncommitted; once that one commits, the next statement (READ
  -- COMMITTED) sees its row and its job, which is returned (or refused as a different request)
  -- having cancelled nothing. Superseding first let the loser cancel the winner's job in the gap
  -- between its lookup and its insert, and then return that job as the duplicate.
  if p_job.submit_key is not null then
    loop
      insert into worker.submit_keys (submit_key, job_id, request) values (p_job.submit_key, p_job.id, p_request)
      on conflict do nothing;
      exit when found;
      select * into v_key from worker.submit_keys k where k.submit_key = p_job.submit_key;
      if found then
        select * into v_row from worker.jobs j where j.id = v_key.job_id;
        if found then
          if v_row.payload is distinct from p_job.payload
             or (case when v_key.request is not null then v_key.request is distinct from p_request
                      else (v_row.type, v_row.dedupe_key, v_row.pool, v_row.concurrency_key, v_row.concurrency_limit)
                           is distinct from (p_job.type, p_job.dedupe_key, p_job.pool, p_job.concurrency_key, p_job.concurrency_limit) end) then
            raise exception 'submit_key "%" was already used for a different request (job %)', p_job.submit_key, v_row.id
              using errcode = 'SB409', column = 'submitKey';
          end if;
          return to_jsonb(v_row) || jsonb_build_object('_duplicate', true);
        end if;
        -- The key names a job that no longer exists. A prune deletes the job and its key in one
        -- transaction, so the next insert gets the key; a key left behind by a delete that fired
        -- no trigger is freed here, so that it cannot make this loop spin.
        delete from worker.submit_keys k
         where k.submit_key = p_job.submit_key and k.job_id = v_key.job_id
           and not exists (select 1 from worker.jobs j where j.id = k.job_id);
      end if;
    end loop;
  end if;

  loop
    if p_job.submit_key is not null then
      -- A job written around the enqueue functions can hold the key without a row above: it
      -- keeps it (the row is made its own), compared on the fields it holds as given.
      select * into v_row from worker.jobs j where j.submit_key = p_job.submit_key;
      if found then
        update worker.submit_keys k set job_id = v_row.id, request = null where k.submit_key = p_job.submit_key;
        if (v_row.type, v_row.payload, v_row.dedupe_key, v_row.pool, v_row.concurrency_key, v_row.concurrency_limit)
           is distinct from (p_job.type, p_job.payload, p_job.dedupe_key, p_job.pool, p_job.concurrency_key, p_job.concurrency_limit) then
          raise exception 'submit_key "%" was already used for a different request (job %)', p_job.submit_key, v_row.id
            using errcode = 'SB409', column = 'submitKey';
        end if;
        return to_jsonb(v_row) || jsonb_build_object('_duplicate', true);
      end if;
    end if;

    v_old := null;
    if p_job.dedupe_key is not null then
      -- Supersede the waiting (never started) job of this key; an active one is left alone
      -- and the new job waits behind it (the claim skips keys with an active job).
      update worker.jobs j
         set status = 'cancelled', finished_at = p_now, superseded_by = p_job.id,
             last_error = 'superseded by job ' || p_job.id
       where j.dedupe_key = p_job.dedupe_key and j.status = 'queued' and j.started_at is null
      returning j.id into v_old;
      if v_old is not null then
        insert into worker.job_events (job_id, at, kind, detail)
        values (v_old, p_now, 'superseded', jsonb_build_object('by', p_job.id));
      end if;
    end if;

    insert into worker.jobs (id, type, payload, priority, run_at, max_attempts, dedupe_key, submit_key,
                             pool, weight, concurrency_key, concurrency_limit, created_at, deadline_at, deadline_severity,
                             rate_key, fair_key)
    values (p_job.id, p_job.type, p_job.payload, p_job.priority, p_job.run_at, p_job.max_attempts, p_job.dedupe_key,
            p_job.submit_key, p_job.pool, p_job.weight, p_job.concurrency_key, p_job.concurrency_limit, p_job.created_at,
            p_job.deadline_at, p_job.deadline_severity, p_job.rate_key, p_job.fair_key)
    on conflict do nothing
    returning * into v_row;
    if found then
      insert into worker.job_events (job_id, at, kind, detail)
      values (p_job.id, p_now, 'enqueued',
              jsonb_build_object('request', p_request || jsonb_build_object('payload', p_job.payload), 'runAt', v_row.run_at)
              || case when v_old is null then '{}'::jsonb else jsonb_build_object('supersedes', v_old) end);
      return to_jsonb(v_row) || jsonb_build_object('_duplicate', false, '_superseded', v_old);
    end if;
    -- A concurrent enqueue took the key's waiting slot first (its submit key is ours): go again,
    -- which supersedes that job.
  end loop;
end $function$
;
