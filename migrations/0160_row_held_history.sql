-- The happy path's history is held on the job row. Every job used to write an `enqueued` event,
-- a `claimed` event at each claim and a `done` event at completion: three heap rows and six btree
-- entries per job, more than its own row versions. The row already says who claimed it when, at which attempt
-- and step, and when it finished; what it lacked was the events' ids (a job's history is read in
-- id order, and an id is where the rollups' cursor stands). So a claim now takes its event's id
-- from the events' sequence onto the row (claimed_event_id), completion takes the done event's
-- (done_event_id), a batch enqueue its enqueued event's (enqueued_event_id), and
-- worker.job_history presents job_events and these row-held events as one history, exactly as
-- the rows used to read. (A single enqueue still writes its enqueued event as a row: it records
-- the request, which the row does not hold.)
--
-- Event rows are still written for what the row cannot hold: when a claim ends any other way
-- (continue, retry, failure, cancel, lease expiry or release) the row's claim fields are about to
-- be reused, so the trigger below writes the claim out as its `claimed` event, with the id the
-- claim took: the history's order is unchanged. A done job that leaves `done` (an operator's
-- requeue) writes out both its claim and its done event the same way, and a batch-enqueued job
-- whose run_at changes (a continue, a retry, a reschedule) writes out its enqueued event, which
-- records the run_at it was enqueued with.
alter table worker.jobs add column claimed_event_id bigint, add column done_event_id bigint, add column enqueued_event_id bigint;

-- The step rollup folds completed steps from the rows (worker.done_step_rows) behind this time
-- cursor, as it folds the other endings from job_events behind last_event_id.
alter table worker.event_rollup add column last_finished_at timestamptz not null default '-infinity';

-- The completed steps the rows hold, for the rollups (its body is
-- migrations/functions/worker.done_step_rows.sql; created here because the functions applied
-- before it in file order read it).
create function worker.done_step_rows(p_after timestamptz, p_upto timestamptz)
  returns table (type text, outcome text, bucket smallint, seconds double precision) language sql stable as $$
  select null::text, null::text, null::smallint, null::float8 where false
$$;

-- Event retention reaches the events the rows hold too: pruning deletes event rows older than
-- the cut and moves this mark to it, and the view and the trigger leave out row-held events
-- before the mark. (Without it a pruned job's history could keep its enqueued event, held on the
-- row, and lose the events after it: a history with a hole, where retention keeps a suffix.)
create table worker.event_retention (
  id       integer primary key default 1 check (id = 1),
  kept_from timestamptz not null default '-infinity'
);
insert into worker.event_retention default values;

-- The claim's event detail, one definition for the view, the trigger and this migration's move
-- (migrations/functions/worker.claimed_event_detail.sql holds the current one). lockedUntil is the
-- lease the claim took: its time plus the type's lease length.
create function worker.claimed_event_detail(p_owner text, p_token uuid, p_attempt integer, p_step text, p_claimed_at timestamptz, p_type text)
  returns jsonb language sql stable as $$
  select jsonb_build_object('owner', p_owner, 'token', p_token, 'attempt', p_attempt, 'step', p_step,
           'lockedUntil', p_claimed_at + make_interval(secs => t.lease_ms / 1000.0))
    from worker.job_types t where t.type = p_type
$$;

-- Written out by the trigger; its body is migrations/functions/worker.write_row_held_events.sql.
-- After the update, not before: a BEFORE trigger refetches the old row for every update whose
-- WHEN it tests, which cost the claim and the completion 3 % of their instructions; this one 1 %.
create function worker.write_row_held_events() returns trigger language plpgsql as $$ begin return null; end $$;
create trigger jobs_write_row_held_events after update on worker.jobs for each row
  when ((old.status = 'running' and new.status <> 'running' and new.status <> 'done') or (old.status = 'done' and new.status <> 'done')
        or (old.enqueued_event_id is not null and old.run_at is distinct from new.run_at))
  execute function worker.write_row_held_events();

-- Moving today's history: first everything the old events hold is folded into the rollups (the
-- functions are still the old ones here), so no step is counted twice or lost once its events
-- move; the done rows finished so far are behind the new cursor.
select worker.rollup_job_events(0, 2147483647, 'infinity');
update worker.event_rollup
   set rolled_at = now(),
       last_finished_at = coalesce((select max(finished_at) from worker.jobs where status = 'done'), '-infinity')
 where id = 1;

-- Then each running or done job's last claim, and each done job's done event, move onto the row
-- where the row presents them as they were written (same time and the same detail); an event the
-- row would present otherwise (its type's lease length changed since, say) stays an event row.
update worker.jobs j set claimed_event_id = c.id
  from (select distinct on (e.job_id) e.job_id, e.id, e.at, e.detail
          from worker.job_events e where e.kind = 'claimed' order by e.job_id, e.id desc) c
 where c.job_id = j.id and j.status in ('running', 'done') and c.at = j.claimed_at
   and c.detail = worker.claimed_event_detail(j.locked_by, j.lease_token, j.attempts, j.step, j.claimed_at, j.type);
update worker.jobs j set done_event_id = d.id
  from (select distinct on (e.job_id) e.job_id, e.id, e.at, e.detail
          from worker.job_events e where e.kind = 'done' order by e.job_id, e.id desc) d
 where d.job_id = j.id and j.status = 'done' and j.claimed_event_id < d.id and d.at = j.finished_at
   and d.detail = jsonb_build_object('attempt', j.attempts);
update worker.jobs j set enqueued_event_id = e.id
  from worker.job_events e
 where e.job_id = j.id and e.kind = 'enqueued' and e.at = j.created_at
   and e.detail = jsonb_build_object('batch', true, 'runAt', j.run_at);
delete from worker.job_events e using worker.jobs j
 where e.job_id = j.id and (e.id = j.claimed_event_id or e.id = j.done_event_id or e.id = j.enqueued_event_id);

-- One history, as it was: the events written as rows and the events the rows hold. A row holds
-- its enqueued event until it is written out, its claim while running or done, and its done
-- event while done, each until event retention passes it; an id already written out as an
-- event row (a row an SQL statement set back to done by hand) is that row's.
create view worker.job_history as
  select e.id, e.job_id, e.at, e.kind, e.detail from worker.job_events e
  union all
  select j.enqueued_event_id, j.id, j.created_at, 'enqueued', jsonb_build_object('batch', true, 'runAt', j.run_at)
    from worker.jobs j, worker.event_retention r
   where j.enqueued_event_id is not null and j.created_at >= r.kept_from
     and not exists (select 1 from worker.job_events x where x.id = j.enqueued_event_id)
  union all
  select j.claimed_event_id, j.id, j.claimed_at, 'claimed',
         worker.claimed_event_detail(j.locked_by, j.lease_token, j.attempts, j.step, j.claimed_at, j.type)
    from worker.jobs j, worker.event_retention r
   where j.claimed_event_id is not null and j.status in ('running', 'done') and j.claimed_at >= r.kept_from
     and not exists (select 1 from worker.job_events x where x.id = j.claimed_event_id)
  union all
  select j.done_event_id, j.id, j.finished_at, 'done', jsonb_build_object('attempt', j.attempts)
    from worker.jobs j, worker.event_retention r
   where j.done_event_id is not null and j.status = 'done' and j.finished_at >= r.kept_from
     and not exists (select 1 from worker.job_events x where x.id = j.done_event_id);
