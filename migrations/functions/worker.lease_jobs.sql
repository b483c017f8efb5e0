CREATE OR REPLACE FUNCTION worker.lease_jobs(p_ids uuid[], p_worker text, p_pool text, p_now timestamp with time zone)
 RETURNS SETOF worker.jobs
 LANGUAGE plpgsql
AS $function$
declare
  -- The fence token: 64 random bits drawn once for this claim, then the job id's random low
  -- half: one strong random draw per claim instead of one per job (that was 3 % of a claim and
  -- completion's instructions). Settles match the token together with the job's id, so it has to
  -- differ only between claims of one job, which the random half makes it; it is as unguessable
  -- as before to anyone who has not seen a token of this same claim.
  v_salt text := left(gen_random_uuid()::text, 19);
begin
  -- The claim's one transition, queued -> running, for jobs the claim admitted and holds
  -- locked (worker.claim_plain, worker.claim_jobs): each takes its claimed event's id (the event
  -- is held on the row, 0160), a lease of its type's length, and the pool it runs in. Answers
  -- them in claim order.
  return query
    with upd as (
      update worker.jobs j
         set status = 'running', attempts = j.attempts + 1, locked_by = p_worker,
             lease_token = (v_salt || right(j.id::text, 17))::uuid,
             locked_until = p_now + make_interval(secs => t.lease_ms / 1000.0),
             running_pool = p_pool, claimed_at = p_now, started_at = coalesce(j.started_at, p_now),
             claimed_event_id = nextval('worker.job_events_id_seq')
        from worker.job_types t
       where j.id = any (p_ids) and t.type = j.type
      returning j.*
    )
    select * from upd order by priority, run_at;
end $function$
;
