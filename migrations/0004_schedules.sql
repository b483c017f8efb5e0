-- Cron schedules. Each slot of a schedule is enqueued with a unique submit key (e.g.
-- billing_cron:2026-11), so a duplicate or overlapping trigger creates nothing new; the
-- per-minute tick backfills a missed slot and raises schedule_missed when a slot has not
-- succeeded within its grace.
create table worker.schedules (
  name                  text primary key,
  cron                  text not null,
  job_type              text not null references worker.job_types (type),
  created_at            timestamptz not null default now(),
  last_slot_at          timestamptz,
  -- kept here, not derived from jobs, because finished jobs are pruned after days and a monthly
  -- schedule must still know when it last succeeded
  last_success_slot_at  timestamptz,
  last_success_at       timestamptz
);

create table worker.schedule_runs (
  schedule  text not null references worker.schedules (name),
  slot_at   timestamptz not null,
  job_id    uuid not null,
  primary key (schedule, slot_at)
);
