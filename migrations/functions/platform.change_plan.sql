CREATE OR REPLACE FUNCTION platform.change_plan(p_account text, p_plan text, p_at timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS text
 LANGUAGE plpgsql
AS $function$
declare
  v_at      timestamptz := coalesce(p_at, now());
  v_next    platform.billing_period := platform.next_period(platform.period_of(v_at));
  v_current text;
begin
  select a.plan into v_current from platform.account_plans a
   where a.account_id = p_account and a.from_period < v_next
   order by a.from_period desc limit 1;
  if v_current is null then
    raise exception 'account % does not exist', p_account using errcode = 'SB400', column = 'accountId';
  end if;
  if p_plan = v_current then
    delete from platform.account_plans a where a.account_id = p_account and a.from_period >= v_next;
  else
    insert into platform.account_plans (account_id, from_period, plan, changed_at)
    values (p_account, v_next, p_plan, v_at)
    on conflict (account_id, from_period) do update set plan = excluded.plan, changed_at = excluded.changed_at;
  end if;
  return p_plan;
end $function$
;
