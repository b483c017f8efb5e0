CREATE OR REPLACE FUNCTION worker.raise_poison_alert(p_kind text, p_job_id uuid, p_message text, p_detail jsonb, p_at timestamp with time zone)
 RETURNS boolean
 LANGUAGE sql
AS $function$
  -- The one insert of a job's terminal alert (poison_job, lease_oom): a job ends once, so a
  -- second raise for it (an open alert of the same kind and key) is a no-op, never a second alert.
  -- Returns whether it opened one.
  with ins as (
    insert into worker.alerts (kind, key, job_id, message, detail, opened_at, last_seen_at)
    values (p_kind, p_job_id::text, p_job_id, p_message, p_detail, p_at, p_at)
    on conflict do nothing
    returning 1
  )
  select exists (select from ins)
$function$
;
