import { beforeAll, beforeEach } from 'vitest';
import { getJob, JobRegistry, runSteps, type Job, type JobType, type Runner, type StepLogLine } from '../../queue/index.ts';
import type { Sql } from '../../queue/db.ts';
import { DigitalOceanCloudProvider } from '../../functions/platform/provisioning/adapters/digitalocean.ts';
import type { CloudProvider } from '../../functions/platform/provisioning/ports/cloud-provider.ts';
import type { SandboxHandle } from '../../sandbox/server.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { createTestSandbox } from '../support/sandbox.ts';

/** Shared by the provisioning tests: a pinned clock, the sandbox's DigitalOcean over HTTP, ticking, crashing. */

export class TestClock {
  constructor(private at = new Date('2030-01-01T00:00:00Z')) {}
  now = (): Date => new Date(this.at);
  advance(ms: number): void {
    this.at = new Date(this.at.getTime() + ms);
  }
}

export interface SandboxDatabaseState {
  id: string;
  name: string;
  status: string;
  tags: string[];
  pools: string[];
}

export interface SandboxDropletState {
  id: number;
  name: string;
  status: string;
  tags: string[];
  publicIpv4: string;
  privateIpv4: string;
}

export interface DigitalOceanFault {
  method?: string;
  path: string;
  status: number;
  count?: number;
  retryAfter?: number;
  afterEffect?: boolean;
}

/** The sandbox's control endpoints, as a test sees them. */
export function digitalOceanControl(sandbox: SandboxHandle) {
  const control = async (path: string, body?: unknown) => {
    const res = await fetch(`${sandbox.url}/_sandbox/digitalocean${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (!res.ok) throw new Error(`sandbox control ${path} answered ${res.status}`);
    return res.json() as Promise<Record<string, unknown>>;
  };
  return {
    state: async () => (await control('/state')) as { databases: SandboxDatabaseState[]; droplets: SandboxDropletState[] },
    fault: (...faults: DigitalOceanFault[]) => control('/faults', faults),
    clearFaults: () => control('/faults/clear', {}),
    config: (c: { databaseReadsUntilOnline?: number; dropletReadsUntilActive?: number }) => control('/config', c),
    bootstrap: (ip: string) => control('/bootstrap', { ip }),
    /** Recorded API calls (not control calls) whose body or query mention `text`. */
    callsMentioning: (text: string, method?: string, path?: string) =>
      sandbox
        .calls('digitalocean')
        .filter((c) => (!method || c.method === method) && (!path || c.path === path) && (JSON.stringify(c.body ?? '').includes(text) || c.query.includes(encodeURIComponent(text)))),
  };
}

export function digitalOceanAdapter(sandbox: SandboxHandle): DigitalOceanCloudProvider {
  return new DigitalOceanCloudProvider({ token: 'dop_v1_sandbox', baseUrl: sandbox.url });
}

/** A runner over the given job types, logging every step line into `logs`. */
export function provisioningRunner(sql: Sql, types: JobType<any>[], clock: TestClock, logs: StepLogLine[], overrides: Partial<Runner> = {}): Runner {
  return { sql, registry: new JobRegistry(types), workerId: 'provision-test', concurrency: 4, clock: clock.now, log: (l) => logs.push(l), ...overrides };
}

/**
 * Tick until `until(job)` holds: run every due step (one runSteps), then move the clock on by
 * `advanceMs` (longer than any poll or provider delay the test configures).
 */
export async function tickUntil(runner: Runner, clock: TestClock, jobId: string, until: (job: Job) => boolean, options: { advanceMs?: number; maxTicks?: number } = {}): Promise<Job> {
  for (let i = 0; i < (options.maxTicks ?? 40); i++) {
    await runSteps(runner);
    const job = (await getJob(runner.sql, jobId))!.job;
    if (until(job)) return job;
    clock.advance(options.advanceMs ?? 10_000);
  }
  const job = (await getJob(runner.sql, jobId))!.job;
  throw new Error(`job ${jobId} did not get there: ${job.status} at step ${job.step} (${job.lastError ?? 'no error'})`);
}

/** Parked until resumed: run_at is 'infinity' (postgres.js reads it as an Invalid Date). */
export const isParked = (job: Job) => job.status === 'queued' && (Number.isNaN(job.runAt.getTime()) || job.runAt.getTime() > 8e15);
export const isTerminal = (job: Job) => ['done', 'failed', 'cancelled', 'oom_killed'].includes(job.status);

/** Counts provider calls; after the `crashAt`-th one returns, `crash()` runs and the step is cut short there. */
export function crashingCloud(inner: CloudProvider, crashAt: number, crash: () => Promise<void>): { cloud: CloudProvider; calls: () => number; crashed: () => boolean } {
  let calls = 0;
  let crashed = false;
  const cloud = new Proxy(inner, {
    get(target, key, receiver) {
      const value = Reflect.get(target, key, receiver);
      if (typeof value !== 'function') return value;
      return async (...args: unknown[]) => {
        const result = await value.apply(target, args);
        calls++;
        if (calls === crashAt && !crashed) {
          crashed = true;
          await crash();
          throw new Error('simulated crash right after a provider call');
        }
        return result;
      };
    },
  });
  return { cloud, calls: () => calls, crashed: () => crashed };
}

/**
 * A real crash: the runner's own database client dies right after the provider call, so the step
 * can neither settle nor record a retry. The job stays `running` until its lease expires.
 */
export async function runUntilCrash(db: TestDatabase, makeTypes: (cloud: CloudProvider) => JobType<any>[], inner: CloudProvider, crashAt: number, clock: TestClock, jobId: string, logs: StepLogLine[]): Promise<void> {
  const doomed = db.client(2);
  const crashing = crashingCloud(inner, crashAt, () => doomed.end({ timeout: 0 }));
  const runner = provisioningRunner(doomed, makeTypes(crashing.cloud), clock, logs);
  for (let i = 0; i < 40 && !crashing.crashed(); i++) {
    // After the crash the runner's next claim fails on its dead client too: that is the crash.
    await runSteps(runner).catch((error: unknown) => {
      if (!crashing.crashed()) throw error;
    });
    if (crashing.crashed()) break;
    const job = (await getJob(db.sql, jobId))!.job;
    if (isTerminal(job) || isParked(job)) throw new Error(`the job got to ${job.status}/${job.step} before provider call ${crashAt}`);
    clock.advance(10_000);
  }
  if (!crashing.crashed()) throw new Error(`no provider call ${crashAt}`);
}

/** Every row of every worker.* and platform.* table, as text: what a database dump would hold. */
export async function databaseDump(sql: Sql): Promise<string> {
  const tables = await sql`
    select table_schema, table_name from information_schema.tables
     where table_schema in ('worker', 'platform') and table_type = 'BASE TABLE' order by 1, 2`;
  const parts: string[] = [];
  for (const t of tables) {
    const rows = await sql`select t::text as row from ${sql(t.table_schema as string)}.${sql(t.table_name as string)} t`;
    parts.push(`-- ${t.table_schema}.${t.table_name}`, ...rows.map((r) => r.row as string));
  }
  return parts.join('\n');
}

export interface ProvisioningTestContext {
  db: TestDatabase;
  sandbox: SandboxHandle;
  control: ReturnType<typeof digitalOceanControl>;
  /** The real adapter, pointed at the sandbox. */
  cloud: DigitalOceanCloudProvider;
  clock: TestClock;
  /** Every step line the runners of this file logged. */
  logs: StepLogLine[];
}

/** A test file's database, sandbox (faults cleared before each test), adapter, pinned clock and log. */
export function provisioningTestContext(): ProvisioningTestContext {
  const context = { clock: new TestClock(), logs: [] as StepLogLine[] } as ProvisioningTestContext;
  beforeAll(async () => {
    context.db = await createTestDatabase();
    context.sandbox = await createTestSandbox();
    context.control = digitalOceanControl(context.sandbox);
    context.cloud = digitalOceanAdapter(context.sandbox);
  });
  beforeEach(async () => {
    await context.control.clearFaults();
  });
  return context;
}
