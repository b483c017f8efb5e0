CREATE OR REPLACE FUNCTION worker.event_time(p_at timestamp with time zone)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE
AS $function$
  -- A time in an event's detail as JavaScript's toISOString writes it (UTC, milliseconds, Z), so
  -- an event reads the same whichever side wrote it; 'infinity' for a parked job's run_at.
  select case when isfinite(p_at) then to_char(p_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') else p_at::text end
$function$
;
