CREATE OR REPLACE FUNCTION worker.truncate_submit_keys()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
  truncate worker.submit_keys;
  return null;
end $function$
;
