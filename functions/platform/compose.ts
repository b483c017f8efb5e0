import { JobRegistry, sampleJobTypes, type JobType, type Sql, type StepResult } from '../../queue/index.ts';
import { readConfig, type PlatformConfig, type WorkerEnv } from '../config.ts';
import { scrubJson } from '../lib/redact.ts';
import { unconfigured } from '../lib/unconfigured.ts';
import { DepotBuildService } from './build/adapters/depot.ts';
import { DurableObjectLogRelay } from './build/adapters/build-log-relay.ts';
import { buildJobType } from './build/build.ts';
import type { BuildService } from './build/ports/build-service.ts';
import { stripeClientFromEnv, StripeBilling } from './billing/adapters/stripe-billing.ts';
import { billingCronJob } from './billing/billing-cron.ts';
import { invoiceAccountJob } from './billing/invoice-account.ts';
import type { Billing } from './billing/ports/billing.ts';
import { cloudInventory } from './cleanup/adapters/cloud-inventory.ts';
import { cleanupJob } from './cleanup/cleanup.ts';
import type { CloudInventory } from './cleanup/ports/cloud-inventory.ts';
import { lazyJobType, unbuilt } from './lazy.ts';
import { accountLogObjectsOf, logArchiveOf } from './log-store.ts';
import { DigitalOceanCloudProvider } from './provisioning/adapters/digitalocean.ts';
import { provisioningJobTypes } from './provisioning/job-types.ts';

/**
 * The composition root: every job type this deployment runs, with its adapters. The registry
 * knows each type's name, options and payload schema at once (the sync, enqueue and the routes
 * read only these); a type's adapters (Depot, DigitalOcean, Stripe, R2, the key ring and the
 * Talos machine configs it opens; R2 or Spaces for the build logs, as LOG_ARCHIVE says) are built when a step of that type first runs in this
 * invocation. So /healthz, and any request or tick that runs no platform step, builds none.
 */

function buildService(p: PlatformConfig): BuildService {
  if (!p.DEPOT_TOKEN || !p.DEPOT_PROJECT_ID) return unconfigured<BuildService>('the Depot build service', 'DEPOT_TOKEN and DEPOT_PROJECT_ID');
  return new DepotBuildService({ baseUrl: p.DEPOT_API_URL ?? 'https://api.depot.dev', token: p.DEPOT_TOKEN, projectId: p.DEPOT_PROJECT_ID });
}

function billing(p: PlatformConfig): Billing {
  const stripe = stripeClientFromEnv(p);
  return stripe ? new StripeBilling(stripe) : unconfigured<Billing>('Stripe billing', 'STRIPE_SECRET_KEY');
}

function inventory(p: PlatformConfig): CloudInventory {
  // A deployment with no cloud provider configured has created no cloud resources, so there is
  // nothing of ours to find; the other sweeps still run.
  if (!p.DIGITALOCEAN_TOKEN) return { listTagged: async () => [], delete: unconfigured<CloudInventory>('the DigitalOcean inventory', 'DIGITALOCEAN_TOKEN').delete };
  return cloudInventory(new DigitalOceanCloudProvider({ token: p.DIGITALOCEAN_TOKEN, baseUrl: p.DIGITALOCEAN_API_URL }));
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

/** The bindings the platform's adapters use. */
export type PlatformBindings = Pick<WorkerEnv, 'BUILD_LOGS' | 'BUILD_LOG_RELAY'>;

export interface Composition {
  registry: JobRegistry;
  /** The types whose adapters were built so far in this invocation, in the order they were. */
  built: readonly string[];
}

/** The platform's types, each declared now and built with its adapters on first use. */
async function platformJobTypes(bindings: PlatformBindings, p: PlatformConfig, sql: Sql, scrub: (text: string) => string, onBuild: (type: string) => void): Promise<JobType<any>[]> {
  const pollIntervalMs = Number(p.BUILD_POLL_INTERVAL_MS ?? 2000);
  const build = buildJobType({ buildService: unbuilt('the build service'), logRelay: unbuilt('the log relay'), logArchive: unbuilt('the log archive'), pollIntervalMs, scrub });
  const invoice = invoiceAccountJob({ billing: unbuilt('the billing provider') });
  const cleanup = cleanupJob({ inventory: unbuilt('the cloud inventory'), logs: unbuilt('the account log objects') });
  return [
    lazyJobType(build, () => buildJobType({
      buildService: buildService(p),
      logRelay: new DurableObjectLogRelay(bindings.BUILD_LOG_RELAY),
      logArchive: logArchiveOf(bindings, p.logStore),
      pollIntervalMs,
      // with a webhook secret set, Depot's build-finished webhook can end the wait between polls
      awaitWebhook: p.DEPOT_WEBHOOK_SECRET !== undefined,
      webhookPollIntervalMs: p.BUILD_WEBHOOK_POLL_INTERVAL_MS ? Number(p.BUILD_WEBHOOK_POLL_INTERVAL_MS) : pollIntervalMs,
      scrub,
    }), onBuild),
    ...(await provisioningJobTypes(p, onBuild)),
    billingCronJob(),
    lazyJobType(invoice, () => invoiceAccountJob({ billing: billing(p) }), onBuild),
    lazyJobType(cleanup, () => cleanupJob({ inventory: inventory(p), logs: accountLogObjectsOf(sql, bindings, p.logStore) }), onBuild),
  ];
}

export async function composeRegistry(bindings: PlatformBindings, platform: PlatformConfig, sql: Sql, scrub: (text: string) => string = (text) => text): Promise<Composition> {
  const built: string[] = [];
  const types: JobType<any>[] = [...sampleJobTypes, ...(await platformJobTypes(bindings, platform, sql, scrub, (type) => built.push(type)))];
  return { registry: new JobRegistry(types.map((type) => scrubbingErrors(type, scrub))), built };
}

/** The registry for an env (its config parsed once per env object). */
export async function createRegistry(env: WorkerEnv, sql: Sql, scrub: (text: string) => string = (text) => text): Promise<JobRegistry> {
  return (await composeRegistry(env, readConfig(env).platform, sql, scrub)).registry;
}
