CREATE OR REPLACE FUNCTION platform.create_account(p_id text, p_plan text, p_stripe_customer_id text DEFAULT NULL::text, p_at timestamp with time zone DEFAULT NULL::timestamp with time zone, p_name text DEFAULT NULL::text)
 RETURNS platform.accounts
 LANGUAGE plpgsql
AS $function$
declare
  v_at  timestamptz := coalesce(p_at, now());
  v_row platform.accounts;
begin
  insert into platform.accounts (id, name, stripe_customer_id, created_at)
  values (p_id, p_name, p_stripe_customer_id, v_at) returning * into v_row;
  insert into platform.account_plans (account_id, from_period, plan, changed_at)
  values (p_id, platform.period_of(v_at), p_plan, v_at);
  return v_row;
end $function$
;
