CREATE OR REPLACE FUNCTION worker.check_leader_churn(p_max integer, p_window_ms bigint, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone, OUT opened integer, OUT resolved integer)
 RETURNS record
 LANGUAGE plpgsql
AS $function$
declare
  v_now timestamptz := coalesce(p_now, now());
begin
  with counts as (
    select l.name, count(h.generation)::int as changes, array_agg(h.holder order by h.generation) filter (where h.generation is not null) as holders
      from worker.leader_lease l
      left join worker.leader_history h
        on h.name = l.name and h.acquired_at > v_now - make_interval(secs => p_window_ms / 1000.0) and h.acquired_at <= v_now
     group by l.name
  ), ins as (
    insert into worker.alerts (kind, key, message, detail, opened_at, last_seen_at)
    select 'leader_churn', c.name,
           'leader lease "' || c.name || '" changed hands ' || c.changes || ' times in '
             || round(p_window_ms / 60000.0) || ' min (more than ' || p_max || ')',
           jsonb_build_object('changes', c.changes, 'max', p_max, 'windowMs', p_window_ms, 'holders', to_jsonb(c.holders)),
           v_now, v_now
      from counts c where c.changes > p_max
    on conflict (kind, key) where resolved_at is null
    do update set last_seen_at = excluded.last_seen_at, occurrences = worker.alerts.occurrences + 1, detail = excluded.detail
    returning (xmax = 0) as inserted
  )
  select count(*) filter (where inserted) into opened from ins;

  with res as (
    update worker.alerts a set resolved_at = v_now
     where a.kind = 'leader_churn' and a.resolved_at is null
       and (select count(*) from worker.leader_history h
             where h.name = a.key and h.acquired_at > v_now - make_interval(secs => p_window_ms / 1000.0)
               and h.acquired_at <= v_now) <= p_max
    returning a.id)
  select count(*) into resolved from res;

  delete from worker.leader_history where acquired_at < v_now - interval '30 days';
end $function$
;
