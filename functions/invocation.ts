import { LogAlerts, runSteps, type Alerts, type JobRegistry, type RunCounts, type Sql } from '../queue/index.ts';
import { readConfig, type WorkerConfig, type WorkerEnv } from './config.ts';
import { createRegistry } from './registry.ts';
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
  alerts: Alerts;
  /** This invocation's id in locked_by: `<pool>:<random>`. */
  workerId: string;
  log(line: Record<string, unknown>): void;
  close(): Promise<void>;
}

// Registries are synced to worker.job_types once per isolate and database.
const syncedDatabases = new Set<string>();

export async function openInvocation(env: WorkerEnv): Promise<Invocation> {
  const config = readConfig(env);
  const url = env.HYPERDRIVE.connectionString;
  const sql = connectInWorker(url, { max: 5, applicationName: `starbase-worker ${config.pool}` });
  const registry = createRegistry(env);
  const log = (line: Record<string, unknown>) => console.log(JSON.stringify(line));
  const invocation: Invocation = {
    env,
    config,
    sql,
    registry,
    alerts: new LogAlerts(),
    workerId: `${config.pool}:${crypto.randomUUID().slice(0, 8)}`,
    log,
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

/** Claim and run due steps until the budget is spent or nothing is due. */
export function drain(inv: Invocation, budgetMs: number): Promise<RunCounts> {
  return runSteps(
    {
      sql: inv.sql,
      registry: inv.registry,
      workerId: inv.workerId,
      pool: inv.config.pool,
      concurrency: inv.config.stepConcurrency,
      alerts: inv.alerts,
      log: inv.config.logSteps ? (line) => inv.log({ ...line }) : undefined,
    },
    { budgetMs },
  );
}
