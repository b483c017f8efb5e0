CREATE OR REPLACE FUNCTION worker.enqueue_job_ex(p_type text, p_payload jsonb DEFAULT '{}'::jsonb, p_priority integer DEFAULT 50, p_run_at timestamp with time zone DEFAULT NULL::timestamp with time zone, p_max_attempts integer DEFAULT NULL::integer, p_dedupe_key text DEFAULT NULL::text, p_submit_key text DEFAULT NULL::text, p_pool text DEFAULT NULL::text, p_weight text DEFAULT NULL::text, p_concurrency_key text DEFAULT NULL::text, p_concurrency_limit integer DEFAULT NULL::integer, p_delay_ms bigint DEFAULT NULL::bigint, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone, p_deadline_ms bigint DEFAULT NULL::bigint, p_deadline_severity text DEFAULT NULL::text, p_rate_limit jsonb DEFAULT NULL::jsonb, p_fairness_key text DEFAULT NULL::text)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  v_now timestamptz := coalesce(p_now, now());
  v_p   record;
begin
  select * into v_p
    from worker.prepare_enqueue(p_type, p_payload, p_priority, p_run_at, p_max_attempts, p_dedupe_key, p_submit_key,
                                p_pool, p_weight, p_concurrency_key, p_concurrency_limit, p_delay_ms, v_now);
  select * into v_p from worker.prepare_deadline(v_p.job, v_p.request, p_deadline_ms, p_deadline_severity);
  -- (only for an enqueue that names them: the common one pays nothing for it)
  if p_rate_limit is not null or p_fairness_key is not null then
    select * into v_p from worker.prepare_flow_keys(v_p.job, v_p.request, p_rate_limit, p_fairness_key);
  end if;
  return worker.enqueue_prepared(v_p.job, v_p.request, v_now);
end $function$
;
