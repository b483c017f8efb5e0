import { Cron } from 'croner';
import type { Queryable } from './db.ts';
import { recentSlotRuns, scheduleRecords, type SlotRun } from './driver/schedules.ts';
import type { Schedule } from './schedules.ts';

export type { SlotRun };

/**
 * Each cron schedule as an operator reads it: its next slot, its last success, and the slots it
 * missed. A missed slot is what the dead-man check (checkSchedules) alerts on: a slot due more than
 * the grace ago, after the schedule's latest successful slot (or its creation), whatever became of
 * its job (none enqueued, failed, or still not done).
 */
export interface ScheduleReport {
  name: string;
  cron: string;
  type: string;
  /** False for a schedule recorded in worker.schedules that the Worker no longer defines. */
  defined: boolean;
  /** The spec's parse error, when it does not parse. */
  invalid: string | null;
  nextSlotAt: Date | null;
  lastSlotAt: Date | null;
  lastSuccessSlotAt: Date | null;
  lastSuccessAt: Date | null;
  /** Missed slots counted up to MISSED_COUNTED (`missedMore` says there are more). */
  missed: number;
  missedMore: boolean;
  /** The newest missed slots, newest first (at most MISSED_SHOWN). */
  missedSlots: Date[];
  /** The newest slots that have a job, newest first. */
  recent: SlotRun[];
}

export const MISSED_COUNTED = 1000;
const MISSED_SHOWN = 5;
const RECENT_SHOWN = 5;

function cronOf(spec: string): Cron | string {
  try {
    return new Cron(spec, { timezone: 'UTC', paused: true });
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}

/** The slots after `since` and at or before `until`, oldest first, at most `max`. */
function slotsBetween(cron: Cron, since: Date, until: Date, max: number): Date[] {
  const slots: Date[] = [];
  let next = cron.nextRun(since);
  while (next && next.getTime() <= until.getTime() && slots.length < max) {
    slots.push(next);
    next = cron.nextRun(next);
  }
  return slots;
}

export async function scheduleReports(sql: Queryable, schedules: readonly Schedule[], options: { now: Date; graceMs: number }): Promise<ScheduleReport[]> {
  const [records, runs] = await Promise.all([scheduleRecords(sql), recentSlotRuns(sql, RECENT_SHOWN)]);
  const names = [...new Set([...schedules.map((s) => s.name), ...records.map((r) => r.name)])].sort();
  const dueBy = new Date(options.now.getTime() - options.graceMs);
  return names.map((name): ScheduleReport => {
    const defined = schedules.find((s) => s.name === name);
    const record = records.find((r) => r.name === name);
    const spec = defined?.cron ?? record!.cron;
    const cron = defined ? cronOf(spec) : null;
    const since = record ? (record.lastSuccessSlotAt ?? record.createdAt) : options.now;
    const due = cron instanceof Cron ? slotsBetween(cron, since, dueBy, MISSED_COUNTED + 1) : [];
    return {
      name,
      cron: spec,
      type: defined?.type ?? record!.type,
      defined: defined !== undefined,
      invalid: typeof cron === 'string' ? cron : null,
      nextSlotAt: cron instanceof Cron ? cron.nextRun(options.now) : null,
      lastSlotAt: record?.lastSlotAt ?? null,
      lastSuccessSlotAt: record?.lastSuccessSlotAt ?? null,
      lastSuccessAt: record?.lastSuccessAt ?? null,
      missed: Math.min(due.length, MISSED_COUNTED),
      missedMore: due.length > MISSED_COUNTED,
      missedSlots: due.slice(-MISSED_SHOWN).reverse(),
      recent: runs.filter((r) => r.schedule === name),
    };
  });
}
