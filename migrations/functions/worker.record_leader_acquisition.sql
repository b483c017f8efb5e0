CREATE OR REPLACE FUNCTION worker.record_leader_acquisition()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
  insert into worker.leader_history (name, generation, holder, acquired_at)
  values (new.name, new.generation, new.holder, coalesce(new.acquired_at, now()))
  on conflict do nothing;
  return null;
end $function$
;
