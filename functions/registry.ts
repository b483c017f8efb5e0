import { z } from 'zod';
import { defineJobType, done, JobRegistry, sampleJobTypes, type JobType } from '../queue/index.ts';
import { DepotBuildService } from './adapters/depot.ts';
import { R2LogArchive } from './adapters/r2-log-archive.ts';
import { DurableObjectLogRelay } from './build-log-relay.ts';
import type { WorkerEnv } from './config.ts';
import { buildJobType } from './jobs/build.ts';
import { provisioningJobTypes } from './jobs/provisioning/from-env.ts';
import { unconfigured } from './lib/unconfigured.ts';
import type { BuildService } from './ports/build-service.ts';

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

function text(env: WorkerEnv, name: string): string | undefined {
  const v = env[name];
  return typeof v === 'string' && v !== '' ? v : undefined;
}

function buildService(env: WorkerEnv): BuildService {
  const token = text(env, 'DEPOT_TOKEN');
  const projectId = text(env, 'DEPOT_PROJECT_ID');
  if (!token || !projectId) return unconfigured<BuildService>('the Depot build service', 'DEPOT_TOKEN and DEPOT_PROJECT_ID');
  return new DepotBuildService({ baseUrl: text(env, 'DEPOT_API_URL') ?? 'https://api.depot.dev', token, projectId });
}

/** The job types this deployment runs, with their adapters built from the invocation's env. */
export async function createRegistry(env: WorkerEnv): Promise<JobRegistry> {
  const types: JobType<any>[] = [
    ...sampleJobTypes,
    buildJobType({
      buildService: buildService(env),
      logRelay: new DurableObjectLogRelay(env.BUILD_LOG_RELAY),
      logArchive: new R2LogArchive(env.BUILD_LOGS),
      pollIntervalMs: Number(text(env, 'BUILD_POLL_INTERVAL_MS') ?? 2000),
    }),
    ...(await provisioningJobTypes({
      DIGITALOCEAN_TOKEN: text(env, 'DIGITALOCEAN_TOKEN'),
      DIGITALOCEAN_API_URL: text(env, 'DIGITALOCEAN_API_URL'),
      ENCRYPTION_KEYS: text(env, 'ENCRYPTION_KEYS'),
      TALOS_IMAGE: text(env, 'TALOS_IMAGE'),
      DIGITALOCEAN_VPC_UUID: text(env, 'DIGITALOCEAN_VPC_UUID'),
      KUBERNETES_VERSION_URL: text(env, 'KUBERNETES_VERSION_URL'),
      PROVISION_POLL_INTERVAL_MS: text(env, 'PROVISION_POLL_INTERVAL_MS'),
    })),
    billingCron,
    cleanup,
  ];
  return new JobRegistry(types);
}
