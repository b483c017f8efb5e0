import { JobRegistry, sampleJobTypes, type JobType, type Sql, type StepResult } from '../../queue/index.ts';
import { DepotBuildService } from './build/adapters/depot.ts';
import { DigitalOceanCloudProvider } from './provisioning/adapters/digitalocean.ts';
import { R2AccountLogObjects } from './cleanup/adapters/r2-account-logs.ts';
import { stripeClientFromEnv, StripeBilling } from './billing/adapters/stripe-billing.ts';
import { R2LogArchive } from './build/adapters/r2-log-archive.ts';
import { DurableObjectLogRelay } from './build/adapters/build-log-relay.ts';
import type { WorkerEnv } from '../config.ts';
import { billingCronJob } from './billing/billing-cron.ts';
import { buildJobType } from './build/build.ts';
import { cleanupJob } from './cleanup/cleanup.ts';
import type { CloudInventory } from './cleanup/ports/cloud-inventory.ts';
import { invoiceAccountJob } from './billing/invoice-account.ts';
import { cloudInventory } from './cleanup/adapters/cloud-inventory.ts';
import { provisioningJobTypes } from './provisioning/compose.ts';
import { scrubJson } from '../lib/redact.ts';
import { unconfigured } from '../lib/unconfigured.ts';
import type { Billing } from './billing/ports/billing.ts';
import type { BuildService } from './build/ports/build-service.ts';

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
function billing(env: WorkerEnv): Billing {
  const stripe = stripeClientFromEnv(env);
  return stripe ? new StripeBilling(stripe) : unconfigured<Billing>('Stripe billing', 'STRIPE_SECRET_KEY');
}

function inventory(env: WorkerEnv): CloudInventory {
  const token = text(env, 'DIGITALOCEAN_TOKEN');
  // A deployment with no cloud provider configured has created no cloud resources, so there is
  // nothing of ours to find; the other sweeps still run.
  if (!token) return { listTagged: async () => [], delete: unconfigured<CloudInventory>('the DigitalOcean inventory', 'DIGITALOCEAN_TOKEN').delete };
  return cloudInventory(new DigitalOceanCloudProvider({ token, baseUrl: text(env, 'DIGITALOCEAN_API_URL') }));
}

/**
 * A step's error is stored (last_error, the job's events, a poison alert's message) and shown
 * later: an adapter's error can quote a token it was given. The Worker's secrets are removed from
 * the error where it leaves the job type, before the runner sees it. The error keeps its class
 * (a PermanentError stays permanent): only its message and stack are rewritten.
 */
function scrubError(error: unknown, scrub: (text: string) => string): unknown {
  if (error instanceof Error) {
    error.message = scrub(error.message);
    if (error.stack) error.stack = scrub(error.stack);
    return error;
  }
  return typeof error === 'string' ? scrub(error) : error;
}

/**
 * A step's checkpoint and result are stored as they are returned and shown by the API: a
 * provider's answer kept there (an error a retry saved in the checkpoint, an id or address it
 * echoed) can quote a token as well. Both are scrubbed the same way before the runner sees them.
 */
function scrubResult(result: StepResult, scrub: (text: string) => string): StepResult {
  if (result.outcome === 'done') return result.result === undefined ? result : { ...result, result: scrubJson(result.result, scrub) };
  return result.checkpoint === undefined ? result : { ...result, checkpoint: scrubJson(result.checkpoint, scrub) };
}

function scrubbingErrors<P>(type: JobType<P>, scrub: (text: string) => string): JobType<P> {
  const guard = async <T>(run: () => Promise<T>): Promise<T> => {
    try {
      return await run();
    } catch (error) {
      throw scrubError(error, scrub);
    }
  };
  return {
    ...type,
    run: (ctx) => guard(async () => scrubResult(await type.run(ctx), scrub)),
    ...(type.onCancel ? { onCancel: (ctx: Parameters<NonNullable<JobType<P>['onCancel']>>[0]) => guard(() => type.onCancel!(ctx)) } : {}),
    ...(type.onFailed ? { onFailed: (ctx: Parameters<NonNullable<JobType<P>['onFailed']>>[0], error: string) => guard(() => type.onFailed!(ctx, scrub(error))) } : {}),
  };
}

export async function createRegistry(env: WorkerEnv, sql: Sql, scrub: (text: string) => string = (text) => text): Promise<JobRegistry> {
  const types: JobType<any>[] = [
    ...sampleJobTypes,
    buildJobType({
      buildService: buildService(env),
      logRelay: new DurableObjectLogRelay(env.BUILD_LOG_RELAY),
      logArchive: new R2LogArchive(env.BUILD_LOGS),
      pollIntervalMs: Number(text(env, 'BUILD_POLL_INTERVAL_MS') ?? 2000),
      scrub,
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
    billingCronJob(),
    invoiceAccountJob({ billing: billing(env) }),
    cleanupJob({ inventory: inventory(env), logs: new R2AccountLogObjects(sql, env.BUILD_LOGS) }),
  ];
  return new JobRegistry(types.map((type) => scrubbingErrors(type, scrub)));
}
