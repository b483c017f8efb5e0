import type { Schedule } from '../queue/index.ts';

/**
 * The Worker's cron schedules. Cloudflare Cron Triggers are at-least-once and may overlap or
 * (rarely) be missed; the engine (queue/schedules.ts) enqueues each slot exactly once and
 * backfills a missed one. This file only lists the schedules and wires them to the engine.
 */
export {
  backfillSlots, checkSchedules, CronSpecError, enqueueSlot, latestSlot, syncSchedules, type Schedule, type SlotResult,
} from '../queue/index.ts';

/** The per-minute tick's Cron Trigger (wrangler.toml). */
export const TICK_CRON = '* * * * *';

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
