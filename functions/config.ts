import { z } from 'zod';
import type { MaintenanceConfig } from '../queue/index.ts';
import type { SpacesSettings } from './adapters/spaces-client.ts';
import type { LogStoreConfig } from './platform/log-store.ts';
import type { SecretName } from './lib/worker-secrets.ts';
import type { UsageBudgets as InvocationBudgets } from './usage.ts';

/**
 * Deployment settings from wrangler.toml [vars] (and secrets), parsed once per env object. The
 * maintenance thresholds and retentions are the engine's MaintenanceConfig, named once there.
 */
export interface WorkerConfig extends Omit<MaintenanceConfig, 'leaderChurn'> {
  pool: string;
  tickBudgetMs: number;
  kickBudgetMs: number;
  stepConcurrency: number;
  /** Dispatcher objects per pool (DISPATCH_SHARDS): shard 0 keeps the clock, the rest take bursts; 0: no dispatchers. */
  dispatchShards: number;
  /** How often an idle shard 0 looks for work it was not told about (IDLE_POLL_MS); 0: only the tick does. */
  idlePollMs: number;
  /** What one invocation may spend before it stops claiming (the platform's per-invocation limits, with headroom). */
  budgets: InvocationBudgets;
  /** The postgres client's connections: CONNECTION_BUDGET less one per step in flight (each may hold a fetch). */
  databaseConnections: number;
  leaderLeaseMs: number;
  logSteps: boolean;
  /** A dashboard session unused this long has ended (sliding; DASHBOARD_IDLE_MS, 30 min). */
  dashboardIdleMs: number;
  /** Where alerts are posted (ALERT_WEBHOOK_URL); null: they are log lines. */
  alertWebhookUrl: string | null;
  /** The dashboard's public URL without a trailing slash (DASHBOARD_URL), for links in alerts. */
  dashboardUrl: string | null;
  /** The platform jobs' adapter settings, used only when a step of their type runs. */
  platform: PlatformConfig;
}

/**
 * The env: wrangler.toml's bindings and vars (Env, from `wrangler types`), the secrets of
 * lib/worker-secrets.ts, and the optional vars below. No index signature: a name not declared
 * here does not compile, so a misspelt `env.X` is caught before it reads `undefined`.
 */
export type WorkerEnv = Env & { [K in SecretName]?: string } & OptionalVars;

/** Vars a deployment may set beyond wrangler.toml's [vars] (`npm start` and tests set some). */
export interface OptionalVars {
  /** "false" turns off the one log line per step. */
  LOG_STEPS?: string;
  DASHBOARD_IDLE_MS?: string;
  /** The dashboard's public URL: alerts link a job to its page there. */
  DASHBOARD_URL?: string;
  /** The Talos custom image at DigitalOcean (its numeric id, or a slug). */
  TALOS_IMAGE?: string;
  /** The VPC cluster droplets join. */
  DIGITALOCEAN_VPC_UUID?: string;
  /** Where a cluster's /version is probed, `{endpoint}` replaced (default https://{endpoint}:6443/version). */
  KUBERNETES_VERSION_URL?: string;
  /** Between polls of a resource being created (default 15 s for databases, 10 s for droplets). */
  PROVISION_POLL_INTERVAL_MS?: string;
  /** Between build polls while Depot's webhook is awaited (DEPOT_WEBHOOK_SECRET set); default BUILD_POLL_INTERVAL_MS. */
  BUILD_WEBHOOK_POLL_INTERVAL_MS?: string;
  /** The Stripe API's address (the sandbox's under `npm start`; default Stripe's own). */
  STRIPE_API_HOST?: string;
  STRIPE_API_PORT?: string;
  STRIPE_API_PROTOCOL?: string;
  /** The Spaces region endpoint, e.g. https://nyc3.digitaloceanspaces.com (LOG_ARCHIVE = "spaces"). */
  SPACES_ENDPOINT?: string;
  SPACES_BUCKET?: string;
  /** The region requests are signed for, e.g. nyc3. */
  SPACES_REGION?: string;
}

/** The Worker's own bearer tokens: whoever presents one may call the API with its scopes. */
export const BEARER_TOKENS = ['ADMIN_TOKEN', 'ENQUEUE_TOKEN', 'METRICS_TOKEN'] as const;
/**
 * 32 characters: a random token that long (`openssl rand -base64 32` gives 44) cannot be guessed
 * online or offline, and a short, typed-in one is refused before it protects anything.
 */
export const MIN_TOKEN_LENGTH = 32;

/** A deployment setting that makes the Worker refuse to run: the message says which and how to fix it. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

/**
 * Refuses every configured bearer token shorter than MIN_TOKEN_LENGTH (an unset token is fine:
 * its scope just has no token of its own). Checked whenever the env is read — a Worker has no
 * start of its own, so each invocation's first act is its start — never showing the value or its length.
 */
export function checkTokens(env: WorkerEnv): void {
  for (const name of BEARER_TOKENS) {
    const value = env[name];
    if (value === undefined || value === '') continue;
    if (typeof value !== 'string' || value.length < MIN_TOKEN_LENGTH) {
      throw new ConfigError(
        `${name} is shorter than ${MIN_TOKEN_LENGTH} characters: make one with \`openssl rand -base64 32\` and set it with \`wrangler secret put ${name}\``,
      );
    }
  }
}

/** Any var, set or not (a missing key is not an error: each var has its default). */
const anyVar = z.unknown().optional();

/** An integer var: unset or empty is the default; anything else must be an integer in range. */
function intVar(name: string, fallback: number, min: number, max: number) {
  return anyVar.transform((raw, ctx) => {
    if (raw === undefined || raw === '') return fallback;
    const n = Number(raw);
    if (Number.isInteger(n) && n >= min && n <= max) return n;
    ctx.addIssue({ code: 'custom', message: `${name} must be an integer from ${min} to ${max}, got ${String(raw)}` });
    return z.NEVER;
  });
}

/** A text var or secret: unset and empty are both "not set". */
const optionalText = anyVar.transform((raw) => (typeof raw === 'string' && raw !== '' ? raw : undefined));

/**
 * The adapters' settings, read as leniently as each adapter always read them: what is missing
 * is reported by the job type that needs it when its step runs, never by a request that runs none.
 */
const platformSchema = z.object({
  DEPOT_TOKEN: optionalText,
  DEPOT_PROJECT_ID: optionalText,
  DEPOT_API_URL: optionalText,
  BUILD_POLL_INTERVAL_MS: optionalText,
  DEPOT_WEBHOOK_SECRET: optionalText,
  BUILD_WEBHOOK_POLL_INTERVAL_MS: optionalText,
  DIGITALOCEAN_TOKEN: optionalText,
  DIGITALOCEAN_API_URL: optionalText,
  DIGITALOCEAN_VPC_UUID: optionalText,
  ENCRYPTION_KEYS: optionalText,
  TALOS_IMAGE: optionalText,
  KUBERNETES_VERSION_URL: optionalText,
  PROVISION_POLL_INTERVAL_MS: optionalText,
  STRIPE_SECRET_KEY: optionalText,
  STRIPE_API_HOST: optionalText,
  STRIPE_API_PORT: optionalText,
  STRIPE_API_PROTOCOL: optionalText,
});


/** The Spaces settings, each required when LOG_ARCHIVE = "spaces". */
const SPACES_VARS = [
  ['SPACES_ENDPOINT', 'endpoint'],
  ['SPACES_BUCKET', 'bucket'],
  ['SPACES_REGION', 'region'],
  ['SPACES_ACCESS_KEY_ID', 'accessKeyId'],
  ['SPACES_SECRET_ACCESS_KEY', 'secretAccessKey'],
] as const satisfies ReadonlyArray<readonly [string, keyof SpacesSettings]>;

/**
 * Unlike the adapters' other settings, the log store is checked on every request: the logs route
 * reads it too, and a store named but not set up would lose every line archived meanwhile.
 */
const logStoreSchema = z
  .object({ LOG_ARCHIVE: optionalText, ...Object.fromEntries(SPACES_VARS.map(([name]) => [name, optionalText])) })
  .transform((v, ctx): LogStoreConfig => {
    const store = v.LOG_ARCHIVE ?? 'r2';
    if (store === 'r2') return { store };
    if (store !== 'spaces') {
      ctx.addIssue({ code: 'custom', message: `LOG_ARCHIVE must be "r2" or "spaces", got ${JSON.stringify(store)}` });
      return z.NEVER;
    }
    const vars = v as Record<string, string | undefined>;
    const missing = SPACES_VARS.filter(([name]) => vars[name] === undefined).map(([name]) => name);
    if (missing.length > 0) {
      ctx.addIssue({ code: 'custom', message: `LOG_ARCHIVE is "spaces" but ${missing.join(', ')} ${missing.length === 1 ? 'is' : 'are'} not set (see docs/deploying.md, "Build logs in Spaces")` });
      return z.NEVER;
    }
    const endpoint = vars.SPACES_ENDPOINT!;
    if (!/^https?:\/\/[^/]/.test(endpoint)) {
      ctx.addIssue({ code: 'custom', message: `SPACES_ENDPOINT must be an http(s) URL such as https://nyc3.digitaloceanspaces.com, got ${JSON.stringify(endpoint)}` });
      return z.NEVER;
    }
    return { store, spaces: Object.fromEntries(SPACES_VARS.map(([name, key]) => [key, vars[name]!])) as unknown as SpacesSettings };
  });

export type PlatformConfig = z.infer<typeof platformSchema> & { logStore: LogStoreConfig };

/** The per-invocation budgets when their vars are unset (and for an invocation whose env is refused). */
export const DEFAULT_BUDGETS: InvocationBudgets = { cpuMs: 20_000, subrequests: 9_000, connections: 6 };

const configSchema = z.object({
  POOL: anyVar.transform((raw) => (typeof raw === 'string' && raw) || 'default'),
  TICK_BUDGET_MS: intVar('TICK_BUDGET_MS', 20_000, 100, 600_000),
  KICK_BUDGET_MS: intVar('KICK_BUDGET_MS', 5_000, 0, 25_000),
  // the postgres client keeps one connection for heartbeats and settles beside the steps
  STEP_CONCURRENCY: intVar('STEP_CONCURRENCY', 4, 1, 4),
  DISPATCH_SHARDS: intVar('DISPATCH_SHARDS', 4, 0, 64),
  IDLE_POLL_MS: intVar('IDLE_POLL_MS', 1_000, 0, 60_000),
  // Workers: 30 s of CPU per invocation by default (limits.cpu_ms raises it to 5 min)
  CPU_BUDGET_MS: intVar('CPU_BUDGET_MS', DEFAULT_BUDGETS.cpuMs, 1_000, 290_000),
  // Workers Paid: 10,000 subrequests per invocation; Free: 50
  SUBREQUEST_BUDGET: intVar('SUBREQUEST_BUDGET', DEFAULT_BUDGETS.subrequests, 10, 10_000),
  // Workers: 6 simultaneous open connections per invocation (more wait for one to close)
  CONNECTION_BUDGET: intVar('CONNECTION_BUDGET', DEFAULT_BUDGETS.connections, 2, 6),
  LEADER_LEASE_MS: intVar('LEADER_LEASE_MS', 300_000, 10_000, 3_600_000),
  CRON_BACKFILL_MS: intVar('CRON_BACKFILL_MS', 86_400_000, 0, 31 * 86_400_000),
  SCHEDULE_GRACE_MS: intVar('SCHEDULE_GRACE_MS', 3_600_000, 0, 31 * 86_400_000),
  STUCK_JOB_MS: intVar('STUCK_JOB_MS', 7_200_000, 60_000, 31 * 86_400_000),
  UNCLAIMED_JOB_MS: intVar('UNCLAIMED_JOB_MS', 900_000, 60_000, 31 * 86_400_000),
  FINISHED_RETENTION_MS: intVar('FINISHED_RETENTION_MS', 7 * 86_400_000, 60_000, 3650 * 86_400_000),
  FAILED_RETENTION_MS: intVar('FAILED_RETENTION_MS', 30 * 86_400_000, 60_000, 3650 * 86_400_000),
  EVENT_RETENTION_MS: intVar('EVENT_RETENTION_MS', 30 * 86_400_000, 60_000, 3650 * 86_400_000),
  // a signal event no wait took: dropped after this long (as long as finished jobs are kept, by default)
  KEPT_SIGNAL_RETENTION_MS: intVar('KEPT_SIGNAL_RETENTION_MS', 7 * 86_400_000, 60_000, 3650 * 86_400_000),
  LOG_STEPS: anyVar.transform((raw) => raw !== 'false'),
  DASHBOARD_IDLE_MS: intVar('DASHBOARD_IDLE_MS', 1_800_000, 60_000, 12 * 3_600_000),
  ALERT_WEBHOOK_URL: optionalText,
  DASHBOARD_URL: optionalText.transform((url) => (url === undefined ? undefined : url.replace(/\/$/, ''))),
});

function toConfig(env: WorkerEnv): WorkerConfig {
  const parsed = configSchema.safeParse(env);
  // the first var in declaration order that is wrong, as the message has always named one
  if (!parsed.success) throw new Error(parsed.error.issues[0]!.message);
  const v = parsed.data;
  const logStore = logStoreSchema.safeParse(env);
  if (!logStore.success) throw new ConfigError(logStore.error.issues[0]!.message);
  if (v.STEP_CONCURRENCY >= v.CONNECTION_BUDGET) {
    throw new Error(
      `STEP_CONCURRENCY (${v.STEP_CONCURRENCY}) must be below CONNECTION_BUDGET (${v.CONNECTION_BUDGET}): each step in flight may hold one connection and the database client needs at least one`,
    );
  }
  return {
    pool: v.POOL,
    tickBudgetMs: v.TICK_BUDGET_MS,
    kickBudgetMs: v.KICK_BUDGET_MS,
    stepConcurrency: v.STEP_CONCURRENCY,
    dispatchShards: v.DISPATCH_SHARDS,
    idlePollMs: v.IDLE_POLL_MS,
    budgets: { cpuMs: v.CPU_BUDGET_MS, subrequests: v.SUBREQUEST_BUDGET, connections: v.CONNECTION_BUDGET },
    databaseConnections: v.CONNECTION_BUDGET - v.STEP_CONCURRENCY,
    leaderLeaseMs: v.LEADER_LEASE_MS,
    cronBackfillMs: v.CRON_BACKFILL_MS,
    scheduleGraceMs: v.SCHEDULE_GRACE_MS,
    stuckJobMs: v.STUCK_JOB_MS,
    unclaimedJobMs: v.UNCLAIMED_JOB_MS,
    finishedRetentionMs: v.FINISHED_RETENTION_MS,
    failedRetentionMs: v.FAILED_RETENTION_MS,
    eventRetentionMs: v.EVENT_RETENTION_MS,
    keptSignalRetentionMs: v.KEPT_SIGNAL_RETENTION_MS,
    logSteps: v.LOG_STEPS,
    dashboardIdleMs: v.DASHBOARD_IDLE_MS,
    alertWebhookUrl: v.ALERT_WEBHOOK_URL ?? null,
    dashboardUrl: v.DASHBOARD_URL ?? null,
    platform: { ...platformSchema.parse(env), logStore: logStore.data },
  };
}

// An env object is the same for every request of an isolate (and a test's override is a new
// object), so it is parsed once per object; a refused env is not kept and is refused again.
const parsedEnvs = new WeakMap<WorkerEnv, WorkerConfig>();

export function readConfig(env: WorkerEnv): WorkerConfig {
  const cached = parsedEnvs.get(env);
  if (cached) return cached;
  checkTokens(env);
  const config = toConfig(env);
  parsedEnvs.set(env, config);
  return config;
}
