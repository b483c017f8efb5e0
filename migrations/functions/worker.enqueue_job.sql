CREATE OR REPLACE FUNCTION worker.enqueue_job(type text, payload jsonb DEFAULT '{}'::jsonb, priority integer DEFAULT 50, run_at timestamp with time zone DEFAULT NULL::timestamp with time zone, max_attempts integer DEFAULT NULL::integer, dedupe_key text DEFAULT NULL::text, submit_key text DEFAULT NULL::text, pool text DEFAULT NULL::text, weight text DEFAULT NULL::text, concurrency_key text DEFAULT NULL::text, concurrency_limit integer DEFAULT NULL::integer, delay_ms bigint DEFAULT NULL::bigint, deadline_ms bigint DEFAULT NULL::bigint, deadline_severity text DEFAULT NULL::text, rate_limit jsonb DEFAULT NULL::jsonb, fairness_key text DEFAULT NULL::text)
 RETURNS worker.jobs
 LANGUAGE sql
AS $function$
  -- called in FROM, so the enqueue runs once (a (f(...)).* select list would call it per column)
  select r.* from jsonb_populate_record(null::worker.jobs,
           worker.enqueue_job_ex($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, null, $13, $14, $15, $16)) r
$function$
;
