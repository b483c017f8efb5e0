import { LogAlerts, nextDueInMs, runSteps, type Alerts, type JobRegistry, type RunCounts, type Sql } from '../queue/index.ts';
import { WebhookAlerts } from './adapters/webhook-alerts.ts';
import { readConfig, type WorkerConfig, type WorkerEnv } from './config.ts';
import { scrubText } from './lib/redact.ts';
import { isSecretName, secretValues } from './lib/worker-secrets.ts';
import { composeRegistry } from './platform/compose.ts';
import { connectInWorker } from './cloudflare-socket.ts';

/**
 * Everything one invocation (a request or a cron trigger) needs. The postgres client is made per
 * invocation — a Worker cannot keep sockets between requests — with at most 5 connections
 * (Workers allow 6 open), and closed deliberately by `close()`.
 */
export interface Invocation {
  env: WorkerEnv;
  config: WorkerConfig;
  sql: Sql;
  registry: JobRegistry;
  /** The job types whose adapters this invocation has built so far (none until a step of one runs). */
  builtJobTypes: readonly string[];
  alerts: Alerts;
  /** This invocation's id in locked_by: `<pool>:<random>`. */
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

// Registries are synced to the engine's job types once per isolate and database.
const syncedDatabases = new Set<string>();

export async function openInvocation(env: WorkerEnv): Promise<Invocation> {
  const config = readConfig(env);
  const url = env.HYPERDRIVE.connectionString;
  const sql = connectInWorker(url, { max: 5, applicationName: `starbase-worker ${config.pool}` });
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
    alerts: webhook
      ? new WebhookAlerts({ url: webhook, scrub, ...(dashboardUrl ? { jobLinkBase: `${dashboardUrl}/dashboard/jobs/` } : {}) })
      : new LogAlerts((line) => console.error(scrub(line))),
    workerId: `${config.pool}:${crypto.randomUUID().slice(0, 8)}`,
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

/**
 * Claim and run due steps until the budget is spent. When nothing is due but a step of this pool
 * falls due within the budget (a build's next poll in 2 s), wait for it rather than leave it to
 * the next tick a minute away.
 */
export async function drain(inv: Invocation, budgetMs: number): Promise<RunCounts> {
  const deadline = Date.now() + budgetMs;
  const total: RunCounts = { claimed: 0, done: 0, continued: 0, retried: 0, failed: 0, cancelled: 0, lost: 0, released: 0 };
  for (;;) {
    const counts = await runSteps(
      {
        sql: inv.sql,
        registry: inv.registry,
        workerId: inv.workerId,
        pool: inv.config.pool,
        concurrency: inv.config.stepConcurrency,
        alerts: inv.alerts,
        log: inv.config.logSteps ? (line) => inv.log({ ...line }) : undefined,
      },
      { budgetMs: Math.max(0, deadline - Date.now()) },
    );
    for (const k of Object.keys(total) as Array<keyof RunCounts>) total[k] += counts[k];
    const left = deadline - Date.now();
    if (left <= 0) return total;
    const dueIn = await nextDueInMs(inv.sql, inv.config.pool);
    if (dueIn === null || dueIn >= left) return total;
    // due now yet nothing was claimed: blocked (behind its dedupe key, at a limit), not waiting for time
    if (dueIn <= 0 && counts.claimed === 0) return total;
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, dueIn) + 5));
  }
}
