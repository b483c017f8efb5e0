import type { Queryable } from '../db.ts';

/** worker.schedules and worker.schedule_runs: a schedule's row, its slots' jobs, its last success. */

/** Record a schedule (idempotent); a changed cron or job type is updated, an unchanged row not written. */
export async function upsertSchedule(sql: Queryable, schedule: { name: string; cron: string; type: string }): Promise<void> {
  await sql`insert into worker.schedules (name, cron, job_type) values (${schedule.name}, ${schedule.cron}, ${schedule.type})
            on conflict (name) do update set cron = excluded.cron, job_type = excluded.job_type
            where (worker.schedules.cron, worker.schedules.job_type) is distinct from (excluded.cron, excluded.job_type)`;
}

/** Link a slot to its job (once: a repeated slot keeps its first link) and move the schedule's last slot forward. */
export async function recordSlotRun(sql: Queryable, schedule: string, slot: Date, jobId: string): Promise<void> {
  await sql`insert into worker.schedule_runs (schedule, slot_at, job_id) values (${schedule}, ${slot}, ${jobId})
            on conflict do nothing`;
  await sql`update worker.schedules set last_slot_at = greatest(last_slot_at, ${slot}::timestamptz) where name = ${schedule}`;
}

/** Whether the slot already has its job. */
export async function slotHasRun(sql: Queryable, schedule: string, slot: Date): Promise<boolean> {
  const rows = await sql`select 1 from worker.schedule_runs where schedule = ${schedule} and slot_at = ${slot}`;
  return rows.length > 0;
}

/** Move each schedule's latest successful slot forward to its newest slot whose job is done. */
export async function recordSuccessfulSlots(sql: Queryable): Promise<void> {
  await sql`
    update worker.schedules s
       set last_success_slot_at = x.slot_at, last_success_at = x.finished_at
      from (select distinct on (r.schedule) r.schedule, r.slot_at, j.finished_at
              from worker.schedule_runs r join worker.jobs j on j.id = r.job_id
             where j.status = 'done'
             order by r.schedule, r.slot_at desc) x
     where x.schedule = s.name and x.slot_at > coalesce(s.last_success_slot_at, '-infinity'::timestamptz)`;
}

export interface ScheduleState {
  name: string;
  createdAt: Date;
  lastSuccessSlotAt: Date | null;
}

interface ScheduleRow {
  name: string;
  created_at: Date;
  last_success_slot_at: Date | null;
}

/** Every recorded schedule: since when it exists and its latest successful slot. */
export async function scheduleStates(sql: Queryable): Promise<ScheduleState[]> {
  const rows = await sql<ScheduleRow[]>`select name, created_at, last_success_slot_at from worker.schedules`;
  return rows.map((r) => ({ name: r.name, createdAt: r.created_at, lastSuccessSlotAt: r.last_success_slot_at }));
}

export interface ScheduleRecord {
  name: string;
  cron: string;
  type: string;
  createdAt: Date;
  lastSlotAt: Date | null;
  lastSuccessSlotAt: Date | null;
  lastSuccessAt: Date | null;
}

/** Every recorded schedule's row, by name. */
export async function scheduleRecords(sql: Queryable): Promise<ScheduleRecord[]> {
  const rows = await sql<{ name: string; cron: string; job_type: string; created_at: Date; last_slot_at: Date | null; last_success_slot_at: Date | null; last_success_at: Date | null }[]>`
    select name, cron, job_type, created_at, last_slot_at, last_success_slot_at, last_success_at from worker.schedules order by name`;
  return rows.map((r) => ({
    name: r.name, cron: r.cron, type: r.job_type, createdAt: r.created_at,
    lastSlotAt: r.last_slot_at, lastSuccessSlotAt: r.last_success_slot_at, lastSuccessAt: r.last_success_at,
  }));
}

export interface SlotRun {
  schedule: string;
  slotAt: Date;
  jobId: string;
  /** The slot's job's status; null once the job is pruned. */
  status: string | null;
}

/** Each schedule's `perSchedule` newest slot runs, with their jobs' status (a range of schedule_runs' primary key each). */
export async function recentSlotRuns(sql: Queryable, perSchedule: number): Promise<SlotRun[]> {
  const rows = await sql<{ schedule: string; slot_at: Date; job_id: string; status: string | null }[]>`
    select s.name as schedule, r.slot_at, r.job_id, j.status
      from worker.schedules s
      cross join lateral (select slot_at, job_id from worker.schedule_runs where schedule = s.name order by slot_at desc limit ${perSchedule}) r
      left join worker.jobs j on j.id = r.job_id
     order by s.name, r.slot_at desc`;
  return rows.map((r) => ({ schedule: r.schedule, slotAt: r.slot_at, jobId: r.job_id, status: r.status }));
}
