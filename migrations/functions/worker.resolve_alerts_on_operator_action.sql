CREATE OR REPLACE FUNCTION worker.resolve_alerts_on_operator_action()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
  update worker.alerts set resolved_at = new.at
   where job_id = new.job_id and resolved_at is null and kind in ('poison_job', 'lease_oom', 'stuck_job', 'deadline_missed');
  return null;
end $function$
;
