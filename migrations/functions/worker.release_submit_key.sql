CREATE OR REPLACE FUNCTION worker.release_submit_key()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
  delete from worker.submit_keys k where k.submit_key = old.submit_key and k.job_id = old.id;
  return null;
end $function$
;
