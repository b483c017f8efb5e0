CREATE OR REPLACE FUNCTION platform.period_of(p_at timestamp with time zone)
 RETURNS platform.billing_period
 LANGUAGE sql
 STABLE
AS $function$ select to_char(p_at at time zone 'UTC', 'YYYY-MM')::platform.billing_period $function$
;
