import { Cron } from 'croner';
import type { Queryable, Sql } from './db.ts';
import { enqueue } from './enqueue.ts';
import type { JsonObject } from './job.ts';
import { raiseAlert, resolveAlerts } from './alert-rows.ts';
import * as driver from './driver/schedules.ts';

/**
 * Cron schedules whose slots must run exactly once. Cron triggers are at-least-once and may
 * overlap or (rarely) be missed: each slot is enqueued with a unique submit key, so a repeated
 * trigger is a no-op, and the tick backfills the latest slot if its trigger never came. Which
 * schedules exist is the caller's (the Worker's SCHEDULES); the slots, runs and the dead-man
 * check are the engine's (worker.schedules, worker.schedule_runs).
 */
export interface Schedule {
  name: string;
  cron: string;
  type: string;
  /** The slot's unique key, e.g. billing_cron:2026-11. */
  slotKey(slot: Date): string;
  payload(slot: Date): JsonObject;
}

/** A schedule whose cron spec does not parse: names the schedule, the spec and the parser's reason. */
export class CronSpecError extends Error {
  constructor(readonly schedule: string, readonly spec: string, reason: string) {
    super(`schedule ${schedule} has an invalid cron spec ${JSON.stringify(spec)}: ${reason}`);
    this.name = 'CronSpecError';
  }
}

/**
 * The latest slot at or before `at` (a trigger firing exactly on its slot belongs to that slot);
 * null when the spec has no slot (e.g. 30 February). A spec that does not parse throws CronSpecError.
 */
export function latestSlot(schedule: Pick<Schedule, 'cron'> & { name?: string }, at: Date): Date | null {
  let cron: Cron;
  try {
    cron = new Cron(schedule.cron, { timezone: 'UTC', paused: true });
  } catch (error) {
    throw new CronSpecError(schedule.name ?? '(unnamed)', schedule.cron, error instanceof Error ? error.message : String(error));
  }
  return cron.previousRuns(1, new Date(at.getTime() + 1000))[0] ?? null;
}

/** latestSlot, with a bad spec reported to `invalid` instead of thrown: one bad schedule must not stop the others. */
function slotOrReport(schedule: Schedule, at: Date, invalid: Map<string, string>): Date | null {
  try {
    return latestSlot(schedule, at);
  } catch (error) {
    if (!(error instanceof CronSpecError)) throw error;
    invalid.set(schedule.name, error.message);
    return null;
  }
}

/** Record each schedule (idempotent), so the dead-man check knows since when it exists. */
export async function syncSchedules(sql: Queryable, schedules: readonly Schedule[]): Promise<void> {
  for (const s of schedules) await driver.upsertSchedule(sql, s);
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
  return sql.begin(async (tx): Promise<SlotResult> => {
    await driver.upsertSchedule(tx, schedule);
    const { job, duplicate } = await enqueue(tx, {
      type: schedule.type,
      payload: schedule.payload(slot),
      submitKey: schedule.slotKey(slot),
      priority: 10,
    });
    await driver.recordSlotRun(tx, schedule.name, slot, job.id);
    return { schedule: schedule.name, slotKey: schedule.slotKey(slot), jobId: job.id, created: !duplicate };
  });
}

/**
 * For each schedule, enqueue its latest slot if that slot is within the backfill window. A
 * schedule with an invalid spec is skipped (checkSchedules reports it); the others still run.
 */
export async function backfillSlots(sql: Sql, now: Date, windowMs: number, schedules: readonly Schedule[]): Promise<SlotResult[]> {
  const created: SlotResult[] = [];
  for (const schedule of schedules) {
    const slot = slotOrReport(schedule, now, new Map());
    if (!slot || now.getTime() - slot.getTime() > windowMs) continue;
    if (await driver.slotHasRun(sql, schedule.name, slot)) continue;
    const result = await enqueueSlot(sql, schedule, slot);
    if (result.created) created.push(result);
  }
  return created;
}

export interface ScheduleCheck {
  missed: string[];
  resolved: number;
  invalid: string[];
}

/**
 * The dead-man check: record each schedule's latest successful slot, then open a
 * schedule_missed alert for a schedule whose slot due `graceMs` ago has not succeeded (and
 * resolve it once one has). A schedule whose spec does not parse opens a schedule_invalid alert
 * naming the spec and the reason, and is listed in `invalid`; the alert is resolved by the first
 * check that finds the spec valid again (or the schedule gone). `resolved` counts both kinds.
 */
export async function checkSchedules(sql: Queryable, now: Date, graceMs: number, schedules: readonly Schedule[]): Promise<ScheduleCheck> {
  await driver.recordSuccessfulSlots(sql);
  const rows = await driver.scheduleStates(sql);
  const missed: string[] = [];
  const invalid = new Map<string, string>();
  let resolved = 0;
  for (const row of rows) {
    const schedule = schedules.find((s) => s.name === row.name);
    if (!schedule) continue;
    const due = slotOrReport(schedule, new Date(now.getTime() - graceMs), invalid);
    const invalidReason = invalid.get(schedule.name);
    if (invalidReason !== undefined) {
      await raiseAlert(sql, { kind: 'schedule_invalid', key: schedule.name, message: invalidReason, detail: { cron: schedule.cron }, now });
      continue;
    }
    const since = row.lastSuccessSlotAt ?? row.createdAt;
    if (due && due.getTime() > since.getTime()) {
      missed.push(schedule.name);
      await raiseAlert(sql, {
        kind: 'schedule_missed',
        key: schedule.name,
        message: `schedule ${schedule.name} (${schedule.cron}) has not succeeded for its slot of ${due.toISOString()}`,
        detail: { due: due.toISOString(), lastSuccessSlot: row.lastSuccessSlotAt?.toISOString() ?? null },
        now,
      });
    } else {
      resolved += await resolveAlerts(sql, { kind: 'schedule_missed', keys: [schedule.name], now });
    }
  }
  // A spec that parses again (or a schedule no longer defined) closes its schedule_invalid alert.
  resolved += await resolveAlerts(sql, { kind: 'schedule_invalid', exceptKeys: [...invalid.keys()], now });
  return { missed, resolved, invalid: [...invalid.keys()] };
}
