import { createExecutionContext, createScheduledController, env, waitOnExecutionContext } from 'cloudflare:test';
import { afterAll } from 'vitest';
import type { Sql } from '../../queue/index.ts';
import type { WorkerEnv } from '../../functions/config.ts';
import worker from '../../functions/index.ts';
import { connectInWorker } from '../../functions/cloudflare-socket.ts';

export type TestEnv = WorkerEnv & { TEST_ADMIN_DATABASE_URL: string; TEST_TEMPLATE_DATABASE: string; TEST_SANDBOX_URL: string };
export const testEnv = env as unknown as TestEnv;

export const TOKENS = { admin: 'test-admin-token-0123456789abcdef0123', enqueue: 'test-enqueue-token-0123456789abcdef01', metrics: 'test-metrics-token-0123456789abcdef01' } as const;

function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

export interface WorkerHarness {
  env: TestEnv;
  /** A client on the file's database, for arranging and checking rows. */
  sql: Sql;
  /** A request through the Worker's fetch handler; waits for its waitUntil work (the kick). */
  request(path: string, init?: RequestInitWith): Promise<Response>;
  /** A Cron Trigger through the Worker's scheduled handler. */
  trigger(cron: string, scheduledTime?: Date, envOverrides?: Partial<TestEnv>): Promise<void>;
}

/**
 * Databases this test file created, dropped after its tests. Files call createWorkerHarness inside
 * beforeAll (or a test), where vitest ignores a new afterAll (the databases were left on the
 * server): this hook is registered when the file imports this module, during collection.
 */
const created: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const drop of created.splice(0).reverse()) await drop();
});

/**
 * Each Worker test file gets its own database cloned from the run's migrated template, and an
 * env whose HYPERDRIVE points at it, so files run in parallel without sharing rows. Its name
 * carries the run's id (the template's suffix), so the global teardown can drop what a failed
 * file left without touching another run's databases on a shared server.
 */
export async function createWorkerHarness(overrides: Partial<TestEnv> = {}): Promise<WorkerHarness> {
  const admin = connectInWorker(testEnv.TEST_ADMIN_DATABASE_URL, { max: 1 });
  const run = testEnv.TEST_TEMPLATE_DATABASE.replace('sb_template_', '');
  const name = `sbw_${run}_${crypto.randomUUID().replace(/-/g, '').slice(0, 10)}`;
  for (let i = 0; ; i++) {
    try {
      await admin.unsafe(`create database ${name} template ${testEnv.TEST_TEMPLATE_DATABASE}`);
      break;
    } catch (error) {
      if (i > 50 || !/being accessed by other users/.test(String((error as Error).message))) throw error;
      await new Promise((r) => setTimeout(r, 50 + Math.random() * 100));
    }
  }
  await admin.end();
  const url = withDatabase(testEnv.TEST_ADMIN_DATABASE_URL, name);
  const sql = connectInWorker(url, { max: 4 });
  const harnessEnv = { ...testEnv, ...overrides, HYPERDRIVE: { connectionString: url } } as unknown as TestEnv;
  created.push(async () => {
    await sql.end({ timeout: 1 }).catch(() => {});
    const cleanup = connectInWorker(testEnv.TEST_ADMIN_DATABASE_URL, { max: 1 });
    try {
      await cleanup.unsafe(`drop database if exists ${name} with (force)`);
    } finally {
      await cleanup.end().catch(() => {});
    }
  });
  return {
    env: harnessEnv,
    sql,
    request: (path, init) => requestThrough(harnessEnv, path, init),
    async trigger(cron, scheduledTime = new Date(), envOverrides = {}) {
      const controller = createScheduledController({ cron, scheduledTime });
      const ctx = createExecutionContext();
      await worker.scheduled(controller, { ...harnessEnv, ...envOverrides } as TestEnv);
      await waitOnExecutionContext(ctx);
    },
  };
}

/**
 * A Worker whose build job drives the sandbox's Depot and polls without a pause, so one tick runs a
 * scripted build to its end; the tick's and the kick's budgets are short so a leftover cannot stall
 * a test (a tick waits for steps due within its budget).
 */
export function sandboxBuildEnv(): Partial<TestEnv> {
  return {
    DEPOT_API_URL: testEnv.TEST_SANDBOX_URL,
    DEPOT_TOKEN: 'sandbox-depot-token',
    DEPOT_PROJECT_ID: 'starbase-test',
    BUILD_POLL_INTERVAL_MS: '0',
    TICK_BUDGET_MS: '3000',
    KICK_BUDGET_MS: '1000',
  } as Partial<TestEnv>;
}

/** A build relay's messages as a 101 answer's socket receives them, and when the end message came. */
export function relayMessages(res: Response): { received: Array<Record<string, any>>; ended: Promise<void> } {
  const ws = res.webSocket!;
  ws.accept();
  const received: Array<Record<string, any>> = [];
  const ended = new Promise<void>((resolve) => ws.addEventListener('message', (m) => {
    const message = JSON.parse(m.data as string) as Record<string, any>;
    received.push(message);
    if (message.type === 'end') resolve();
  }));
  return { received, ended };
}

export type RequestInitWith = RequestInit & { token?: keyof typeof TOKENS | null; json?: unknown };

/** A request through the Worker's fetch handler with `env`; waits for its waitUntil work (the kick, a wake-up). */
export async function requestThrough(env: WorkerEnv, path: string, init: RequestInitWith = {}): Promise<Response> {
  const { token = 'admin', json, ...rest } = init;
  const headers = new Headers(rest.headers);
  if (token) headers.set('authorization', `Bearer ${TOKENS[token]}`);
  if (json !== undefined) headers.set('content-type', 'application/json');
  const req = new Request(`http://worker.test${path}`, { ...rest, headers, body: json !== undefined ? JSON.stringify(json) : rest.body });
  const ctx = createExecutionContext();
  const res = await worker.fetch(req as never, env, ctx);
  await waitOnExecutionContext(ctx);
  return res as unknown as Response;
}

export async function countJobs(sql: Sql, where?: ReturnType<Sql>): Promise<number> {
  const [row] = await sql`select count(*)::int as n from worker.jobs ${where ? sql`where ${where}` : sql``}`;
  return row!.n as number;
}
