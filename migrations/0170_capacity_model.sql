-- The capacity model of the operations manual ("Weight Classes", "Active Worker Hosts",
-- "Self-Healing"): three weight classes whose cost is their memory limit in GB, an explicit
-- escalation target per class, a largest class per pool, and a pool's capacity by time of day.
--
-- 1. Weight classes: light 3 GB, playwright 6 GB, heavy 8 GB, ranked by memory (light 1 <
--    playwright 2 < heavy 3). light and heavy keep their names, so every job and job type keeps
--    its class; only the costs and heavy's rank change.
--
-- 2. Escalation targets (weight_classes.escalates_to; null: the class escalates nowhere). The
--    manual re-queues an OOM-killed job "as weight=heavy", from whatever class it ran at, and ends
--    it when heavy also dies: light -> heavy, playwright -> heavy, heavy -> none. The rescue
--    follows escalates_to instead of "the next rank" (which would send light to playwright, a
--    class the manual never escalates to).
--
-- 3. pool_capacity.max_running_weight was configured in the old units (light 1, heavy 2) and is
--    now GB. Each value W becomes the most memory a pool of W could run before: 8 GB for each
--    heavy job that fit (W / 2) and 3 GB for an odd unit left over (W % 2). Why this number:
--    every mix of running jobs that fit a pool before (2 * heavy + light <= W) still fits it
--    (8 * heavy + 3 * light is at most that), so no pool runs fewer jobs of any mix than it did
--    and no pinned job an old pool could run is refused now; and no pool can run more memory at
--    once than it could before (the new limit is the old peak), so a host sized for the old limit
--    is not overcommitted. A pool runs as many heavy jobs as before (at most W / 2), and light
--    jobs fill what heavy ones could have used: 1 -> 3 (one light), 2 -> 8 (one heavy or two
--    light), 3 -> 11 (a heavy and a light, or three light), 7 -> 27, 10 -> 40 (five heavy, or
--    thirteen light).
--
-- 4. pool_capacity.max_weight: the largest class a pool runs (null: any). A claim never takes a
--    job of a larger class, enqueue refuses a job pinned to a pool that could never run it, and
--    the rescue ends a pinned job oom_killed rather than escalating it past its pool's class.
--
-- 5. worker.pool_capacity_windows: a pool's max_running_weight by time of day, in UTC. A window
--    holds from `starts` up to (not including) `ends`; one whose end is not after its start wraps
--    midnight (20:00-08:00). Outside every window the pool's own max_running_weight holds. A
--    pool's windows never overlap (a trigger refuses one that would, naming both), so at any
--    moment at most one is in force.

alter table worker.weight_classes
  add column escalates_to text references worker.weight_classes (name),
  add constraint weight_classes_escalates_elsewhere check (escalates_to <> name);

update worker.weight_classes set rank = 3, cost = 8 where name = 'heavy';
update worker.weight_classes set rank = 1, cost = 3 where name = 'light';
insert into worker.weight_classes (name, rank, cost) values ('playwright', 2, 6);
update worker.weight_classes set escalates_to = 'heavy' where name in ('light', 'playwright');

update worker.pool_capacity set max_running_weight = 8 * (max_running_weight / 2) + 3 * (max_running_weight % 2);

alter table worker.pool_capacity add column max_weight text references worker.weight_classes (name);

create table worker.pool_capacity_windows (
  pool               text not null references worker.pool_capacity (pool) on delete cascade,
  name               text not null check (length(name) between 1 and 100),
  starts             time not null check (starts < '24:00'),
  ends               time not null,
  max_running_weight int  not null check (max_running_weight >= 0),
  primary key (pool, name),
  -- a window of the whole day is the pool's own max_running_weight
  constraint pool_capacity_windows_not_empty check (starts <> ends and not (starts = '00:00' and ends = '24:00'))
);

-- Written out by the trigger; its body is migrations/functions/worker.check_pool_capacity_window.sql.
create function worker.check_pool_capacity_window() returns trigger language plpgsql as $$ begin return new; end $$;
create trigger pool_capacity_windows_no_overlap before insert or update on worker.pool_capacity_windows
  for each row execute function worker.check_pool_capacity_window();
