import { Cron } from 'croner';
import { enqueue, type JsonObject, type Queryable, type Sql } from '../queue/index.ts';

/**
 * Cron schedules whose slots must run exactly once. Cloudflare Cron Triggers are at-least-once
 * and may overlap or (rarely) be missed: each slot is enqueued with a unique submit key, so a
 * repeated trigger is a no-op, and the tick backfills the latest slot if its trigger never came.
 */
/** The per-minute tick's Cron Trigger (wrangler.toml). */
export const TICK_CRON = '* * * * *';

export interface Schedule {
  name: string;
  cron: string;
  type: string;
  /** The slot's unique key, e.g. billing_cron:2026-11. */
  slotKey(slot: Date): string;
  payload(slot: Date): JsonObject;
}

/** The month before the slot's month: billing at 00:00 on the 1st bills the month that just ended. */
export function previousMonth(slot: Date): string {
  const d = new Date(Date.UTC(slot.getUTCFullYear(), slot.getUTCMonth() - 1, 1));
  return `${d.getUTCFullYear()}-${String(d.getUTCMonth() + 1).padStart(2, '0')}`;
}

export const SCHEDULES: readonly Schedule[] = [
  {
    name: 'billing_cron',
    cron: '0 0 1 * *',
    type: 'billing_cron',
    slotKey: (slot) => `billing_cron:${previousMonth(slot)}`,
    payload: (slot) => ({ period: previousMonth(slot) }),
  },
  {
    name: 'cleanup',
    cron: '*/15 * * * *',
    type: 'cleanup',
    slotKey: (slot) => `cleanup:${slot.toISOString().slice(0, 16)}Z`,
    payload: () => ({}),
  },
];

export function scheduleForCron(cron: string): Schedule | undefined {
  return SCHEDULES.find((s) => s.cron === cron);
}

/** The latest slot at or before `at` (a trigger firing exactly on its slot belongs to that slot). */
export function latestSlot(schedule: Pick<Schedule, 'cron'>, at: Date): Date | null {
  const cron = new Cron(schedule.cron, { timezone: 'UTC', paused: true });
  return cron.previousRuns(1, new Date(at.getTime() + 1000))[0] ?? null;
}

/** Record a schedule (idempotent), so the dead-man check knows since when it exists. */
async function syncSchedule(sql: Queryable, s: Schedule): Promise<void> {
  await sql`insert into worker.schedules (name, cron, job_type) values (${s.name}, ${s.cron}, ${s.type})
            on conflict (name) do update set cron = excluded.cron, job_type = excluded.job_type
            where (worker.schedules.cron, worker.schedules.job_type) is distinct from (excluded.cron, excluded.job_type)`;
}

export async function syncSchedules(sql: Sql): Promise<void> {
  for (const s of SCHEDULES) await syncSchedule(sql, s);
}

export interface SlotResult {
  schedule: string;
  slotKey: string;
  jobId: string;
  /** False when this slot already had its job (a repeated or overlapping trigger). */
  created: boolean;
}

/** Enqueue the job of one slot, exactly once however often it is called. */
export async function enqueueSlot(sql: Sql, schedule: Schedule, slot: Date): Promise<SlotResult> {
  return (await sql.begin(async (tx) => {
    await syncSchedule(tx, schedule);
    const { job, duplicate } = await enqueue(tx, {
      type: schedule.type,
      payload: schedule.payload(slot),
      submitKey: schedule.slotKey(slot),
      priority: 10,
    });
    await tx`insert into worker.schedule_runs (schedule, slot_at, job_id) values (${schedule.name}, ${slot}, ${job.id})
             on conflict do nothing`;
    await tx`update worker.schedules set last_slot_at = greatest(last_slot_at, ${slot}::timestamptz) where name = ${schedule.name}`;
    return { schedule: schedule.name, slotKey: schedule.slotKey(slot), jobId: job.id, created: !duplicate };
  })) as SlotResult;
}

/** For each schedule, enqueue its latest slot if that slot is within the backfill window. */
export async function backfillSlots(sql: Sql, now: Date, windowMs: number): Promise<SlotResult[]> {
  const created: SlotResult[] = [];
  for (const schedule of SCHEDULES) {
    const slot = latestSlot(schedule, now);
    if (!slot || now.getTime() - slot.getTime() > windowMs) continue;
    const [known] = await sql`select 1 from worker.schedule_runs where schedule = ${schedule.name} and slot_at = ${slot}`;
    if (known) continue;
    const result = await enqueueSlot(sql, schedule, slot);
    if (result.created) created.push(result);
  }
  return created;
}

/**
 * The dead-man check: record each schedule's latest successful slot, then open a
 * schedule_missed alert for a schedule whose slot due `graceMs` ago has not succeeded (and
 * resolve it once one has).
 */
export async function checkSchedules(sql: Sql, now: Date, graceMs: number): Promise<{ missed: string[]; resolved: number }> {
  await sql`
    update worker.schedules s
       set last_success_slot_at = x.slot_at, last_success_at = x.finished_at
      from (select distinct on (r.schedule) r.schedule, r.slot_at, j.finished_at
              from worker.schedule_runs r join worker.jobs j on j.id = r.job_id
             where j.status = 'done'
             order by r.schedule, r.slot_at desc) x
     where x.schedule = s.name and x.slot_at > coalesce(s.last_success_slot_at, '-infinity'::timestamptz)`;
  const rows = await sql`select name, created_at, last_success_slot_at from worker.schedules`;
  const missed: string[] = [];
  let resolved = 0;
  for (const row of rows) {
    const schedule = SCHEDULES.find((s) => s.name === row.name);
    if (!schedule) continue;
    const due = latestSlot(schedule, new Date(now.getTime() - graceMs));
    const since = (row.last_success_slot_at as Date | null) ?? (row.created_at as Date);
    if (due && due.getTime() > since.getTime()) {
      missed.push(schedule.name);
      await sql`
        insert into worker.alerts (kind, key, message, detail, opened_at, last_seen_at)
        values ('schedule_missed', ${schedule.name},
                ${`schedule ${schedule.name} (${schedule.cron}) has not succeeded for its slot of ${due.toISOString()}`},
                ${sql.json({ due: due.toISOString(), lastSuccessSlot: (row.last_success_slot_at as Date | null)?.toISOString() ?? null })},
                ${now}, ${now})
        on conflict (kind, key) where resolved_at is null
        do update set last_seen_at = excluded.last_seen_at, occurrences = worker.alerts.occurrences + 1`;
    } else {
      const done = await sql`update worker.alerts set resolved_at = ${now}
                              where kind = 'schedule_missed' and key = ${schedule.name} and resolved_at is null returning id`;
      resolved += done.length;
    }
  }
  return { missed, resolved };
}
