CREATE OR REPLACE FUNCTION platform.next_period(p platform.billing_period)
 RETURNS platform.billing_period
 LANGUAGE sql
 STABLE
AS $function$
  select to_char(to_date(p, 'YYYY-MM') + interval '1 month', 'YYYY-MM')::platform.billing_period
$function$
;
