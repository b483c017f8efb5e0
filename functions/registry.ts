import { z } from 'zod';
import { defineJobType, done, JobRegistry, sampleJobTypes, type JobType } from '../queue/index.ts';
import type { WorkerEnv } from './config.ts';

/**
 * Interim billing_cron and cleanup types: they record their slot and finish, so the cron-slot
 * mechanics run end to end; the billing issue replaces them with the real jobs.
 */
const billingCron = defineJobType({
  type: 'billing_cron',
  payload: z.object({ period: z.string().regex(/^\d{4}-\d{2}$/) }),
  async run({ payload }) {
    return done({ period: payload.period, invoices: 0 });
  },
});
const cleanup = defineJobType({
  type: 'cleanup',
  payload: z.object({ dryRun: z.boolean().optional() }),
  async run() {
    return done({ swept: 0 });
  },
});

/** The job types this deployment runs, with their adapters built from the invocation's env. */
export function createRegistry(_env: WorkerEnv): JobRegistry {
  const types: JobType<any>[] = [...sampleJobTypes, billingCron, cleanup];
  return new JobRegistry(types);
}
