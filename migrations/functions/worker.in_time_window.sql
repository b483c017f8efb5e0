CREATE OR REPLACE FUNCTION worker.in_time_window(p_at time without time zone, p_starts time without time zone, p_ends time without time zone)
 RETURNS boolean
 LANGUAGE sql
 IMMUTABLE
AS $function$
  -- [starts, ends) within a day; a window whose end is not after its start wraps midnight
  select case when p_starts < p_ends then p_at >= p_starts and p_at < p_ends
              else p_at >= p_starts or p_at < p_ends end
$function$
;
