-- Operations (issue 7): what /metrics, the dashboard and the alerts need beyond the engine's rows.
-- Nothing here touches the settle path: counters are rolled up from worker.job_events after the
-- fact, so a busy queue pays no extra write per step.

-- Queue depth over time (the dashboard's chart): the leader's tick writes one row per minute.
create table worker.depth_snapshots (
  at       timestamptz primary key,
  queued   int not null,   -- every queued job, due or scheduled for later
  due      int not null,   -- queued and due: waiting for a runner
  running  int not null
);

-- Both counts come from the partial indexes on queued and running rows: cheap on a large table.
create function worker.record_depth_snapshot(p_at timestamptz, p_retention_ms bigint default 604800000)
returns void language sql as $$
  insert into worker.depth_snapshots (at, queued, due, running)
  select date_trunc('minute', p_at),
         count(*) filter (where status = 'queued'),
         count(*) filter (where status = 'queued' and run_at <= p_at),
         count(*) filter (where status = 'running')
    from worker.jobs where status in ('queued', 'running')
  on conflict (at) do nothing;
  delete from worker.depth_snapshots where at < p_at - make_interval(secs => p_retention_ms / 1000.0);
$$;

-- One row per acquisition of a leader lease (each generation), written by a trigger so that
-- every acquirer is recorded, whoever calls worker.claim_leader_lease. Renewals do not change
-- the generation and write nothing.
create table worker.leader_history (
  name         text not null,
  generation   bigint not null,
  holder       text,
  acquired_at  timestamptz not null,
  primary key (name, generation)
);

create function worker.record_leader_acquisition() returns trigger language plpgsql as $$
begin
  insert into worker.leader_history (name, generation, holder, acquired_at)
  values (new.name, new.generation, new.holder, coalesce(new.acquired_at, now()))
  on conflict do nothing;
  return null;
end $$;

create trigger leader_lease_acquired after update on worker.leader_lease
  for each row when (new.generation is distinct from old.generation)
  execute function worker.record_leader_acquisition();

-- Leader churn: more than p_max acquisitions of a lease within the window means leaders keep
-- losing it (ticks missing their renewals). Opens one leader_churn alert per lease name while
-- that holds (the same open row, not one per pass), resolves it once it no longer does, and
-- forgets history older than 30 days.
create function worker.check_leader_churn(p_max int, p_window_ms bigint, p_now timestamptz default null,
  out opened int, out resolved int)
language plpgsql as $$
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
end $$;

-- An operator acting on a job settles its alerts: a requeue (the job runs again) or a manual
-- fail (the operator has decided) resolves the job's open poison_job, lease_oom and stuck_job
-- alerts. If the job fails again, a new poison_job alert opens and is sent.
create function worker.resolve_alerts_on_operator_action() returns trigger language plpgsql as $$
begin
  update worker.alerts set resolved_at = new.at
   where job_id = new.job_id and resolved_at is null and kind in ('poison_job', 'lease_oom', 'stuck_job');
  return null;
end $$;

create trigger job_events_operator_resolves after insert on worker.job_events
  for each row when (new.kind = 'requeued' or (new.kind = 'failed' and new.detail ? 'manual'))
  execute function worker.resolve_alerts_on_operator_action();

-- Step statistics and job counters for /metrics, rolled up from job_events. They must survive
-- serverless invocations (no process memory) and the pruning of events, so a roll-up adds each
-- settled prefix of events into these tables, and a reader adds the not-yet-rolled tail.
--
-- The step-duration histogram's upper bounds in seconds; a bucket number is how many bounds lie
-- below the duration (0 … n, n being +Inf).
create function worker.step_duration_bounds() returns float8[] language sql immutable as $$
  select '{0.01,0.05,0.1,0.25,0.5,1,2.5,5,10,30,60,300}'::float8[]
$$;

-- Steps by type, outcome and duration bucket.
create table worker.step_stats (
  type     text not null,
  outcome  text not null,     -- done | continued | retried | failed | cancelled | released | lost
  bucket   smallint not null,
  steps    bigint not null,
  seconds  float8 not null,   -- sum of durations
  primary key (type, outcome, bucket)
);

-- Job-level counters by type: retry (a step error that will be retried), poison (the engine
-- failed the job: attempts used up, a permanent error, or a lease lost on the final attempt),
-- oom_killed.
create table worker.job_counters (
  type     text not null,
  counter  text not null,
  n        bigint not null,
  primary key (type, counter)
);

-- Events up to last_event_id are in the tables above. Starts at the events already present:
-- counters begin at this migration.
create table worker.event_rollup (
  id             int primary key default 1 check (id = 1),
  last_event_id  bigint not null,
  rolled_at      timestamptz
);
insert into worker.event_rollup (last_event_id) select coalesce(max(id), 0) from worker.job_events;

-- A step is a claim and the first step-ending event after it: the runner's settles (done,
-- checkpoint, retry, failed, cancelled, lease_released), a crash found by the rescue
-- (lease_expired), or an operator's fail or lease release of a running job. Its duration runs
-- from the claimed event to that event.
create function worker.step_rows(p_after bigint, p_upto bigint)
returns table (type text, outcome text, bucket smallint, seconds float8)
language sql stable as $$
  select coalesce(j.type, '(pruned)'),
         case e.kind when 'done' then 'done' when 'checkpoint' then 'continued' when 'retry' then 'retried'
                     when 'failed' then 'failed' when 'cancelled' then 'cancelled'
                     when 'lease_released' then 'released' else 'lost' end,
         (select count(*) from unnest(worker.step_duration_bounds()) b where b < extract(epoch from e.at - c.at))::smallint,
         greatest(extract(epoch from e.at - c.at)::float8, 0)
    from worker.job_events e
    join lateral (select c.id, c.at from worker.job_events c
                   where c.job_id = e.job_id and c.kind = 'claimed' and c.id < e.id
                   order by c.id desc limit 1) c on true
    left join worker.jobs j on j.id = e.job_id
   where e.id > p_after and e.id <= p_upto
     and e.kind in ('done', 'checkpoint', 'retry', 'failed', 'cancelled', 'lease_released', 'lease_expired')
     and not exists (select 1 from worker.job_events x
                      where x.job_id = e.job_id and x.id > c.id and x.id < e.id
                        and x.kind in ('done', 'checkpoint', 'retry', 'failed', 'cancelled', 'lease_released', 'lease_expired'))
$$;

create function worker.counter_rows(p_after bigint, p_upto bigint)
returns table (type text, counter text)
language sql stable as $$
  select coalesce(j.type, '(pruned)'),
         case when e.kind = 'retry' then 'retry' when e.kind = 'oom_killed' then 'oom_killed' else 'poison' end
    from worker.job_events e
    left join worker.jobs j on j.id = e.job_id
   where e.id > p_after and e.id <= p_upto
     and (e.kind in ('retry', 'oom_killed') or (e.kind = 'failed' and not e.detail ? 'manual'))
$$;

-- Roll up the events older than p_lag_ms (at most p_limit of them) into step_stats and
-- job_counters. Only a prefix of ids whose events are all older than the lag is taken: an event
-- id is assigned before its transaction commits, and settles are short statements, so after the
-- lag no lower id can still appear. One roller at a time (the row lock); a second returns 0.
create function worker.rollup_job_events(p_lag_ms bigint default 60000, p_limit int default 100000, p_now timestamptz default null)
returns int language plpgsql as $$
declare
  v_now   timestamptz := coalesce(p_now, now());
  v_from  bigint;
  v_young bigint;
  v_upto  bigint;
begin
  select last_event_id into v_from from worker.event_rollup where id = 1 for update skip locked;
  if not found then return 0; end if;
  select min(e.id) into v_young from worker.job_events e
   where e.id > v_from and e.at >= v_now - make_interval(secs => p_lag_ms / 1000.0);
  select coalesce(v_young - 1, max(e.id), v_from) into v_upto from worker.job_events e where e.id > v_from;
  v_upto := least(v_upto, v_from + p_limit);
  if v_upto <= v_from then return 0; end if;

  insert into worker.step_stats (type, outcome, bucket, steps, seconds)
  select s.type, s.outcome, s.bucket, count(*), sum(s.seconds) from worker.step_rows(v_from, v_upto) s
   group by 1, 2, 3
  on conflict (type, outcome, bucket)
  do update set steps = worker.step_stats.steps + excluded.steps, seconds = worker.step_stats.seconds + excluded.seconds;

  insert into worker.job_counters (type, counter, n)
  select r.type, r.counter, count(*) from worker.counter_rows(v_from, v_upto) r group by 1, 2
  on conflict (type, counter) do update set n = worker.job_counters.n + excluded.n;

  update worker.event_rollup set last_event_id = v_upto, rolled_at = v_now where id = 1;
  return v_upto - v_from;
end $$;

-- What the counters read now: the rolled-up rows plus the tail not rolled up yet, in one
-- statement (one snapshot), so a concurrent roll-up can neither double-count nor drop events.
create function worker.current_step_stats()
returns table (type text, outcome text, bucket smallint, steps bigint, seconds float8)
language sql stable as $$
  with w as (select last_event_id from worker.event_rollup where id = 1)
  select x.type, x.outcome, x.bucket, sum(x.steps)::bigint, sum(x.seconds)::float8
    from (select s.type, s.outcome, s.bucket, s.steps, s.seconds from worker.step_stats s
          union all
          select t.type, t.outcome, t.bucket, 1, t.seconds
            from w, worker.step_rows(w.last_event_id, 9223372036854775807) t) x
   group by 1, 2, 3
$$;

create function worker.current_job_counters()
returns table (type text, counter text, n bigint)
language sql stable as $$
  with w as (select last_event_id from worker.event_rollup where id = 1)
  select x.type, x.counter, sum(x.n)::bigint
    from (select c.type, c.counter, c.n from worker.job_counters c
          union all
          select t.type, t.counter, 1 from w, worker.counter_rows(w.last_event_id, 9223372036854775807) t) x
   group by 1, 2
$$;
