CREATE OR REPLACE FUNCTION worker.claim_leader_lease(p_holder text, p_ttl_ms integer DEFAULT 300000, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone, p_name text DEFAULT 'default'::text, OUT is_leader boolean, OUT outcome text, OUT holder text, OUT generation bigint, OUT expires_at timestamp with time zone)
 RETURNS record
 LANGUAGE plpgsql
AS $function$
declare
  v_now timestamptz := coalesce(p_now, now());
  v_row worker.leader_lease;
begin
  insert into worker.leader_lease (name) values (p_name) on conflict do nothing;
  select * into v_row from worker.leader_lease l where l.name = p_name for update;
  if v_row.holder = p_holder and v_row.expires_at > v_now then
    update worker.leader_lease l set expires_at = v_now + make_interval(secs => p_ttl_ms / 1000.0)
     where l.name = p_name returning * into v_row;
    outcome := 'renewed';
  elsif v_row.holder is null or v_row.expires_at <= v_now then
    update worker.leader_lease l
       set holder = p_holder, acquired_at = v_now, expires_at = v_now + make_interval(secs => p_ttl_ms / 1000.0),
           generation = l.generation + 1
     where l.name = p_name returning * into v_row;
    outcome := 'acquired';
  else
    outcome := 'follower';
  end if;
  is_leader := outcome <> 'follower';
  holder := v_row.holder;
  generation := v_row.generation;
  expires_at := v_row.expires_at;
end $function$
;
