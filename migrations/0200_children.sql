-- Child jobs with join: a step ends by enqueueing children and waiting for all of them, the
-- first, or a count to end (queue/children.ts). The parent is parked (queued, run_at infinity:
-- no claims while it waits); the child whose end completes the join makes the parent due in the
-- same transaction as its own settle, so nothing polls.
--
-- worker.child_joins: one row per fan-out of a parent (its wait_no counts them), saying how many
--   children it has, how many have ended and how many the join needs, and when it was joined.
--   Every child's end updates its wait's row: the row lock serializes the last children ending
--   at once, so exactly one of them sees the count reach `need` and wakes the parent.
-- worker.job_children: which jobs a wait joins, in the order given. A child may be joined by
--   more than one wait (a re-run adopting a job an earlier run created, by its submit key).
-- worker.jobs.parent_id: the parent that created (or first adopted) the job. It is on the row
--   for the trigger below, whose WHEN clause must say from the row alone whether a job is
--   anyone's child: every other job ends without calling a function.
create table worker.child_joins (
  parent_id uuid not null,
  wait_no integer not null check (wait_no >= 1),
  join_kind text not null check (join_kind in ('all', 'first', 'count')),
  need integer not null check (need >= 0),
  total integer not null check (total >= 0 and need <= total),
  ended integer not null default 0 check (ended >= 0),
  -- children this spawn enqueued; the others were adopted (an existing job with the submit key)
  created integer not null default 0 check (created >= 0),
  next_step text not null,
  created_at timestamptz not null,
  joined_at timestamptz,
  joined_by uuid,
  primary key (parent_id, wait_no)
);

create table worker.job_children (
  parent_id uuid not null,
  wait_no integer not null,
  child_id uuid not null,
  position integer not null,
  -- when the child ended as far as this wait counted it (null while it has not)
  ended_at timestamptz,
  primary key (parent_id, wait_no, child_id),
  foreign key (parent_id, wait_no) references worker.child_joins on delete cascade
);
create index job_children_child_idx on worker.job_children (child_id);

alter table worker.jobs add column parent_id uuid;

-- The trigger's function (its body is migrations/functions/worker.child_job_ended.sql; created
-- here because a trigger needs its function, and the function files come after the migrations).
create function worker.child_job_ended() returns trigger language plpgsql as $$ begin return null; end $$;
create trigger jobs_child_ended after update on worker.jobs for each row
  when (new.parent_id is not null and (old.finished_at is null) <> (new.finished_at is null))
  execute function worker.child_job_ended();

-- A job's children, each wait's, with the child's outcome as it is now.
create view worker.children as
  select c.parent_id, c.wait_no, c.position, c.child_id, j.type, j.status, j.result, j.last_error,
         j.submit_key, j.created_at, j.finished_at, c.ended_at as counted_at,
         w.join_kind, w.need, w.total, w.ended as wait_ended, w.created as wait_created, w.joined_at, w.next_step
    from worker.job_children c
    join worker.child_joins w on w.parent_id = c.parent_id and w.wait_no = c.wait_no
    left join worker.jobs j on j.id = c.child_id;
