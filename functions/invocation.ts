import { LogAlerts, nextDueInMs, runSteps, type Alerts, type JobRegistry, type RunCounts, type Runner, type Sql } from '../queue/index.ts';
import { WebhookAlerts } from './adapters/webhook-alerts.ts';
import { DEFAULT_BUDGETS, readConfig, type WorkerConfig, type WorkerEnv } from './config.ts';
import { scrubText } from './lib/redact.ts';
import { isSecretName, secretValues } from './lib/worker-secrets.ts';
import { composeRegistry } from './platform/compose.ts';
import { connectInWorker } from './cloudflare-socket.ts';
import { currentUsage, installFetchCounting, InvocationUsage } from './usage.ts';

/**
 * Everything one invocation (a request, a cron trigger or a dispatcher's alarm) needs. The postgres
 * client is made per invocation — a Worker cannot keep sockets between requests — with
 * CONNECTION_BUDGET less STEP_CONCURRENCY connections (Workers allow 6 open; each step in flight
 * may hold one for a fetch), and closed deliberately by `close()`.
 */
export interface Invocation {
  env: WorkerEnv;
  config: WorkerConfig;
  sql: Sql;
  registry: JobRegistry;
  /** The job types whose adapters this invocation has built so far (none until a step of one runs). */
  builtJobTypes: readonly string[];
  alerts: Alerts;
  /** What this invocation has spent of the platform's per-invocation limits (subrequests, time, connections). */
  usage: InvocationUsage;
  /** This invocation's id in locked_by: `<pool>:<role>:<random>`, the role saying which clock ran the step. */
  workerId: string;
  /** One JSON line on stdout, with every secret value of the env scrubbed out. */
  log(line: Record<string, unknown>): void;
  /** Removes the env's secret values from free text (errors can echo a token). */
  scrub(text: string): string;
  close(): Promise<void>;
}

/** An env variable outside the list but named like a secret (a deployment's own `FOO_API_TOKEN`). */
const SECRET_LIKE_NAME = /(TOKEN|SECRET|PASSWORD|KEYRING|KEYS|WEBHOOK_URL|API_KEY|PRIVATE_KEY)/i;

/**
 * The secret values of an env: every secret of lib/worker-secrets.ts that is set (and each key
 * inside the key ring), any other string variable named like a secret, and the database
 * connection string with its password. Each is listed raw and as it appears inside a JSON
 * string, so a scrubbed JSON log line cannot leak an escaped copy.
 */
export function envSecrets(env: WorkerEnv): string[] {
  const values = secretValues(env);
  for (const [name, value] of Object.entries(env)) {
    if (typeof value === 'string' && value !== '' && SECRET_LIKE_NAME.test(name) && !isSecretName(name)) values.push(value);
  }
  const url = env.HYPERDRIVE?.connectionString;
  if (url) {
    values.push(url);
    try {
      const password = decodeURIComponent(new URL(url).password);
      if (password) values.push(password);
    } catch {
      // not a URL: scrubbed whole above
    }
  }
  // longest first, so a secret containing another is removed whole
  return [...new Set([...values, ...values.map((v) => JSON.stringify(v).slice(1, -1))])].sort((a, b) => b.length - a.length);
}

/**
 * A counter for an invocation that starts now, with the deployment's budgets (the defaults when
 * the env is refused: the refusal is reported by the code that reads it, not here).
 */
export function entryUsage(env: WorkerEnv): InvocationUsage {
  let budgets: WorkerConfig['budgets'];
  try {
    budgets = readConfig(env).budgets;
  } catch {
    budgets = DEFAULT_BUDGETS;
  }
  return new InvocationUsage(budgets);
}

// Registries are synced to the engine's job types once per isolate and database.
const syncedDatabases = new Set<string>();

/** Which entry point an invocation is: a request (and its kick), the tick, a schedule's cron, a dispatcher shard's alarm. */
export type InvocationRole = 'request' | 'tick' | 'cron' | `dispatcher-${number}`;

/**
 * `pool` overrides the deployment's POOL: a dispatcher serves the pool it was woken for. The
 * usage counter is the one the entry point runs under (withUsage), or a fresh one.
 */
export async function openInvocation(env: WorkerEnv, options: { pool?: string; role?: InvocationRole } = {}): Promise<Invocation> {
  installFetchCounting();
  const deployed = readConfig(env);
  const config = options.pool === undefined || options.pool === deployed.pool ? deployed : { ...deployed, pool: options.pool };
  const url = env.HYPERDRIVE.connectionString;
  const sql = connectInWorker(url, { max: config.databaseConnections, applicationName: `starbase-worker ${config.pool}` });
  const secrets = envSecrets(env);
  const scrub = (text: string) => scrubText(text, secrets);
  const { registry, built } = await composeRegistry(env, config.platform, sql, scrub);
  const log = (line: Record<string, unknown>) => console.log(scrub(JSON.stringify(line)));
  const { alertWebhookUrl: webhook, dashboardUrl } = config;
  const invocation: Invocation = {
    env,
    config,
    sql,
    registry,
    builtJobTypes: built,
    usage: currentUsage() ?? new InvocationUsage(config.budgets),
    alerts: webhook
      ? new WebhookAlerts({ url: webhook, scrub, ...(dashboardUrl ? { jobLinkBase: `${dashboardUrl}/dashboard/jobs/` } : {}) })
      : new LogAlerts((line) => console.error(scrub(line))),
    workerId: `${config.pool}:${options.role ?? 'request'}:${crypto.randomUUID().slice(0, 8)}`,
    log,
    scrub,
    async close() {
      // A socket the runtime already tore down makes end() reject; the client is discarded either way.
      await sql.end({ timeout: 1 }).catch(() => {});
    },
  };
  if (!syncedDatabases.has(url)) {
    await registry.sync(sql);
    syncedDatabases.add(url);
  }
  return invocation;
}

export interface DrainOptions {
  /**
   * When nothing is due but a step of this pool falls due within the budget (a build's next poll
   * in 2 s), wait for it. Only without dispatchers: with them, the dispatcher's alarm is set for
   * that time and an invocation need not wait (default: when DISPATCH_SHARDS is 0).
   */
  waitForDue?: boolean;
}

/**
 * Claim and run due steps until the budget is spent, nothing is due, or a per-invocation limit's
 * budget (subrequests, CPU) is reached — then in-flight steps finish and no more are claimed.
 */
export async function drain(inv: Invocation, budgetMs: number, options: DrainOptions = {}): Promise<RunCounts> {
  const waitForDue = options.waitForDue ?? inv.config.dispatchShards === 0;
  const deadline = Date.now() + budgetMs;
  const total: RunCounts = { claimed: 0, done: 0, continued: 0, retried: 0, failed: 0, cancelled: 0, lost: 0, released: 0 };
  for (;;) {
    const counts = await runSteps(stepRunner(inv), {
      budgetMs: Math.max(0, deadline - Date.now()),
      stopClaiming: () => inv.usage.exhausted() !== null,
    });
    for (const k of Object.keys(total) as Array<keyof RunCounts>) total[k] += counts[k];
    const left = deadline - Date.now();
    if (left <= 0 || !waitForDue || inv.usage.exhausted() !== null) return total;
    const dueIn = await nextDueInMs(inv.sql, inv.config.pool);
    if (dueIn === null || dueIn >= left) return total;
    // due now yet nothing was claimed: blocked (behind its dedupe key, at a limit), not waiting for time
    if (dueIn <= 0 && counts.claimed === 0) return total;
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, dueIn) + 5));
  }
}

/** The engine's runner for this invocation's steps. */
export function stepRunner(inv: Invocation): Runner {
  return {
    sql: inv.sql,
    registry: inv.registry,
    workerId: inv.workerId,
    pool: inv.config.pool,
    concurrency: inv.config.stepConcurrency,
    alerts: inv.alerts,
    log: inv.config.logSteps ? (line) => inv.log({ ...line }) : undefined,
  };
}
