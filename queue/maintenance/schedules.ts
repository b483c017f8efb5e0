import { backfillSlots, checkSchedules, syncSchedules, type ScheduleCheck } from '../schedules.ts';
import type { MaintenanceService } from './service.ts';

/** The cron passes: the slots are computed from the run's `now` whatever its clock (a trigger's time is the slot's). */

export const syncSchedulesService: MaintenanceService<true> = {
  async runOnce(ctx) {
    await syncSchedules(ctx.sql, ctx.schedules);
    return true;
  },
};

/** The slot keys of the missed slots this pass enqueued. */
export const backfillService: MaintenanceService<string[]> = {
  async runOnce(ctx) {
    return (await backfillSlots(ctx.sql, ctx.now, ctx.config.cronBackfillMs, ctx.schedules)).map((s) => s.slotKey);
  },
};

export const scheduleCheckService: MaintenanceService<ScheduleCheck> = {
  runOnce: (ctx) => checkSchedules(ctx.sql, ctx.now, ctx.config.scheduleGraceMs, ctx.schedules),
};
