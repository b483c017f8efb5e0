import type { SecretName } from './lib/worker-secrets.ts';

/** Deployment settings from wrangler.toml [vars] (and secrets), parsed once per invocation. */
export interface WorkerConfig {
  pool: string;
  tickBudgetMs: number;
  kickBudgetMs: number;
  stepConcurrency: number;
  leaderLeaseMs: number;
  cronBackfillMs: number;
  scheduleGraceMs: number;
  stuckJobMs: number;
  unclaimedJobMs: number;
  finishedRetentionMs: number;
  failedRetentionMs: number;
  eventRetentionMs: number;
  logSteps: boolean;
  /** A dashboard session unused this long has ended (sliding; DASHBOARD_IDLE_MS, 30 min). */
  dashboardIdleMs: number;
}

/** The env: wrangler.toml's bindings and vars, and the secrets of lib/worker-secrets.ts. */
export type WorkerEnv = Env & { [K in SecretName]?: string } & {
  LOG_STEPS?: string;
  DASHBOARD_IDLE_MS?: string;
  [key: string]: unknown;
};

function int(env: WorkerEnv, name: (keyof Env | 'DASHBOARD_IDLE_MS') & string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new Error(`${name} must be an integer from ${min} to ${max}, got ${String(raw)}`);
  }
  return n;
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

export function readConfig(env: WorkerEnv): WorkerConfig {
  checkTokens(env);
  return {
    pool: (typeof env.POOL === 'string' && env.POOL) || 'default',
    tickBudgetMs: int(env, 'TICK_BUDGET_MS', 20_000, 100, 600_000),
    kickBudgetMs: int(env, 'KICK_BUDGET_MS', 5_000, 0, 25_000),
    // the postgres client keeps one connection for heartbeats and settles beside the steps
    stepConcurrency: int(env, 'STEP_CONCURRENCY', 4, 1, 4),
    leaderLeaseMs: int(env, 'LEADER_LEASE_MS', 300_000, 10_000, 3_600_000),
    cronBackfillMs: int(env, 'CRON_BACKFILL_MS', 86_400_000, 0, 31 * 86_400_000),
    scheduleGraceMs: int(env, 'SCHEDULE_GRACE_MS', 3_600_000, 0, 31 * 86_400_000),
    stuckJobMs: int(env, 'STUCK_JOB_MS', 7_200_000, 60_000, 31 * 86_400_000),
    unclaimedJobMs: int(env, 'UNCLAIMED_JOB_MS', 900_000, 60_000, 31 * 86_400_000),
    finishedRetentionMs: int(env, 'FINISHED_RETENTION_MS', 7 * 86_400_000, 60_000, 3650 * 86_400_000),
    failedRetentionMs: int(env, 'FAILED_RETENTION_MS', 30 * 86_400_000, 60_000, 3650 * 86_400_000),
    eventRetentionMs: int(env, 'EVENT_RETENTION_MS', 30 * 86_400_000, 60_000, 3650 * 86_400_000),
    logSteps: env.LOG_STEPS !== 'false',
    dashboardIdleMs: int(env, 'DASHBOARD_IDLE_MS', 1_800_000, 60_000, 12 * 3_600_000),
  };
}
