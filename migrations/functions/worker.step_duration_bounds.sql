CREATE OR REPLACE FUNCTION worker.step_duration_bounds()
 RETURNS double precision[]
 LANGUAGE sql
 IMMUTABLE
AS $function$
  select '{0.01,0.05,0.1,0.25,0.5,1,2.5,5,10,30,60,300}'::float8[]
$function$
;
