CREATE OR REPLACE FUNCTION worker.settle_and_claim(p_done jsonb, p_worker text, p_pool text, p_limit integer, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone, p_types text[] DEFAULT NULL::text[])
 RETURNS json
 LANGUAGE plpgsql
AS $function$
declare
  v_settled json := '[]'::json;
  v_jobs    json;
begin
  if jsonb_array_length(coalesce(p_done, '[]'::jsonb)) > 0 then
    select coalesce(json_agg(c.id), '[]'::json) into v_settled from worker.complete_jobs(p_done, p_now) c;
  end if;
  select coalesce(json_agg(json_build_array(
           j.id, j.type, j.payload, j.status, j.priority, j.run_at, j.attempts, j.max_attempts, j.locked_until,
           j.locked_by, j.lease_token, j.dedupe_key, j.submit_key, j.last_error, j.result, j.step, j.checkpoint,
           j.pool, j.weight, j.running_pool, j.concurrency_key, j.concurrency_limit, j.cancel_requested_at,
           j.cancel_reason, j.superseded_by, j.crashes, j.created_at, j.started_at, j.claimed_at, j.finished_at,
           j.deadline_at, j.deadline_severity)), '[]'::json)
    into v_jobs from worker.claim_jobs(p_worker, p_pool, p_limit, p_now, p_types) j;
  return json_build_object('settled', v_settled, 'jobs', v_jobs);
end $function$
;
