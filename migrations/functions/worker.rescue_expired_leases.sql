CREATE OR REPLACE FUNCTION worker.rescue_expired_leases(p_limit integer DEFAULT 1000, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone, OUT requeued integer, OUT failed integer, OUT oom_killed integer)
 RETURNS record
 LANGUAGE plpgsql
 SET enable_bitmapscan TO 'off'
 SET enable_seqscan TO 'off'
 SET jit TO 'off'
AS $function$
declare
  v_now timestamptz := coalesce(p_now, now());
begin
  with expired as (
    -- A crash re-queues the job at its class's escalation target (0170: light and playwright
    -- escalate to heavy, heavy to none). A job pinned to a pool escalates only to a class that
    -- pool can run: not above its max_weight, not costing more than its largest capacity (its
    -- own max_running_weight or a window's). An unpinned job escalates regardless: a runner
    -- without a pool, or of a pool without a capacity row, has no limit.
    select j.id, j.weight, j.pool, j.attempts, j.max_attempts, j.locked_by, j.lease_token,
           n.name as next_weight, n.cost as next_cost, worker.pool_largest_capacity(pc.pool) as pool_max,
           pc.max_weight as pool_max_weight, coalesce(n.rank > m.rank, false) as above_max
      from worker.jobs j
      join worker.weight_classes c on c.name = j.weight
      left join worker.weight_classes n on n.name = c.escalates_to
      left join worker.pool_capacity pc on pc.pool = j.pool
      left join worker.weight_classes m on m.name = pc.max_weight
     where j.status = 'running' and j.locked_until < v_now
     order by j.locked_until
     limit p_limit
       for update of j skip locked
  ), decided as (
    select x.*, (x.next_weight is not null and (x.above_max or coalesce(x.next_cost > x.pool_max, false))) as no_room,
           case when x.next_weight is null or x.above_max or x.next_cost > x.pool_max then 'oom_killed'
                when x.attempts >= x.max_attempts then 'failed'
                else 'queued' end as outcome
      from expired x
  ), upd as (
    update worker.jobs j
       set status = d.outcome,
           weight = case when d.outcome = 'queued' then d.next_weight else j.weight end,
           crashes = j.crashes + 1,
           run_at = case when d.outcome = 'queued' then v_now else j.run_at end,
           locked_until = null, running_pool = null,
           finished_at = case when d.outcome = 'queued' then null else v_now end,
           last_error = case
             when d.above_max then 'lease expired at ' || j.weight || ', and pool ' || j.pool || ' cannot run its escalation ('
                                   || d.next_weight || ' is above its max_weight ' || d.pool_max_weight || '): oom_killed'
             when d.no_room then 'lease expired at ' || j.weight || ', and pool ' || j.pool || ' cannot run its escalation ('
                                 || d.next_weight || ' costs ' || d.next_cost || ', max_running_weight ' || d.pool_max || '): oom_killed'
             when d.outcome = 'oom_killed' then 'lease expired at the top weight class (' || j.weight || ', which escalates to none): oom_killed'
             when d.outcome = 'failed' then 'lease expired on the final attempt (' || j.attempts || '/' || j.max_attempts || ')'
             else 'lease expired (owner ' || coalesce(j.locked_by, '?') || ' crashed or timed out)' end
      from decided d
     where j.id = d.id
    returning j.id, j.type, j.pool, d.outcome, d.no_room, d.above_max, d.weight as from_weight, d.next_weight, d.next_cost,
              d.pool_max, d.pool_max_weight,
              d.locked_by, d.lease_token, j.attempts
  ), ev as (
    insert into worker.job_events (job_id, at, kind, detail)
    select u.id, v_now, 'lease_expired', jsonb_build_object('owner', u.locked_by, 'token', u.lease_token, 'attempt', u.attempts)
      from upd u
    union all
    select u.id, v_now, 'escalated', jsonb_build_object('from', u.from_weight, 'to', u.next_weight)
      from upd u where u.outcome = 'queued'
    union all
    select u.id, v_now, u.outcome, jsonb_build_object('reason', 'lease expired')
             || case when u.no_room then jsonb_build_object('weight', u.from_weight, 'next', u.next_weight,
                  'nextCost', u.next_cost, 'pool', u.pool, 'maxRunningWeight', u.pool_max, 'maxWeight', u.pool_max_weight)
                else '{}'::jsonb end
      from upd u where u.outcome <> 'queued'
  ), al as (
    select worker.raise_poison_alert(
             case u.outcome when 'oom_killed' then 'lease_oom' else 'poison_job' end, u.id,
             'job ' || u.id || ' (' || u.type || ') ended ' || u.outcome || ' after its lease expired'
               || case when u.above_max then ' at ' || u.from_weight || ': its escalation, ' || u.next_weight
                         || ', is above pool ' || u.pool || '''s max_weight ' || u.pool_max_weight
                       when u.no_room then ' at ' || u.from_weight || ': its escalation, ' || u.next_weight || ' (cost '
                         || u.next_cost || '), does not fit pool ' || u.pool || ' (max_running_weight ' || u.pool_max || ')'
                       else '' end,
             jsonb_build_object('type', u.type, 'attempts', u.attempts)
               || case when u.no_room then jsonb_build_object('weight', u.from_weight, 'next', u.next_weight,
                    'pool', u.pool, 'maxRunningWeight', u.pool_max, 'maxWeight', u.pool_max_weight) else '{}'::jsonb end,
             v_now)
      from upd u where u.outcome <> 'queued'
  )
  select count(*) filter (where outcome = 'queued'), count(*) filter (where outcome = 'failed'),
         count(*) filter (where outcome = 'oom_killed')
    into requeued, failed, oom_killed
    from upd
    -- al is a plain select, which runs only as far as it is read: reading its count (one row)
    -- raises every alert without changing the counts
    cross join (select count(*) from al) alerted;
end $function$
;
