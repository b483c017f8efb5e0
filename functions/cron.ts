import type { WorkerEnv } from './config.ts';
import { drain, openInvocation } from './invocation.ts';
import { enqueueSlot, latestSlot, scheduleForCron, TICK_CRON } from './schedules.ts';
import { runTick } from './tick.ts';

/**
 * A Cron Trigger: the per-minute tick, or a schedule's own trigger (billing, cleanup), which
 * enqueues that slot's job exactly once and drains. The client is closed when the work is done.
 */
export async function scheduled(controller: ScheduledController, env: WorkerEnv): Promise<void> {
  // a manually fired event (wrangler dev's /__scheduled) may carry no scheduled time
  const now = Number.isFinite(controller.scheduledTime) ? new Date(controller.scheduledTime) : new Date();
  const inv = await openInvocation(env, { role: controller.cron === TICK_CRON ? 'tick' : 'cron' });
  try {
    if (controller.cron === TICK_CRON) {
      const result = await runTick(inv, now);
      inv.log({ level: 'info', msg: 'tick', leader: result.leader.outcome, generation: result.leader.generation, maintenance: result.maintenance, dispatcher: result.dispatcher, steps: result.steps });
      return;
    }
    const schedule = scheduleForCron(controller.cron);
    if (!schedule) {
      inv.log({ level: 'warn', msg: `no schedule for cron "${controller.cron}"` });
      return;
    }
    const slot = latestSlot(schedule, now)!;
    const result = await enqueueSlot(inv.sql, schedule, slot);
    inv.log({ level: 'info', msg: 'cron slot', ...result });
    await drain(inv, inv.config.tickBudgetMs);
  } finally {
    await inv.close();
  }
}
