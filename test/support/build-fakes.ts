import { DepotBuildService } from '../../functions/platform/build/adapters/depot.ts';
import { R2LogArchive, type LogBucket } from '../../functions/platform/build/adapters/r2-log-archive.ts';
import { buildJobType, type BuildPayload } from '../../functions/platform/build/build.ts';
import type { BuildService, LogLine } from '../../functions/platform/build/ports/build-service.ts';
import type { LogRelay } from '../../functions/platform/build/ports/log-relay.ts';
import {
  claimJobs, enqueue, JobRegistry, runSteps, type Job, type JobType, type RunCounts, type Runner, type StepContext, type StepResult,
} from '../../queue/index.ts';
import type { Sql } from '../../queue/db.ts';
import { beforeAll } from 'vitest';
import { createTestDatabase, type TestDatabase } from './db.ts';
import { createTestSandbox } from './sandbox.ts';
import { seedService, TEST_ACCOUNT } from './tenancy.ts';
import type { RecordedCall, SandboxHandle } from '../../sandbox/server.ts';

/** A LogRelay that records every publish, in order (what live viewers would have been sent). */
export class RecordingLogRelay implements LogRelay {
  readonly published: { buildId: string; lines: LogLine[] }[] = [];
  /** Make the next n publishes throw (a relay outage). */
  failNext = 0;

  async publish(buildId: string, lines: LogLine[]): Promise<void> {
    if (this.failNext > 0) {
      this.failNext--;
      throw new Error('relay unavailable');
    }
    this.published.push({ buildId, lines: lines.map((l) => ({ ...l })) });
  }

  /** Every line sent for a build, repeats included. */
  linesOf(buildId: string): LogLine[] {
    return this.published.filter((p) => p.buildId === buildId).flatMap((p) => p.lines);
  }
}

interface StoredObject {
  body: string;
  etag: string;
  customMetadata: Record<string, string>;
}

/**
 * An in-memory R2 bucket with R2's conditional put (`onlyIf` etag match / `etagDoesNotMatch: '*'`,
 * answering null when the condition fails), recording every put. `beforePut` lets a test slip a
 * competing write in between a reader's get and its put.
 */
export class MemoryBucket implements LogBucket {
  readonly objects = new Map<string, StoredObject>();
  readonly puts: { key: string; body: string; customMetadata: Record<string, string>; written: boolean }[] = [];
  beforePut?: (key: string) => void;
  private version = 0;

  async get(key: string) {
    const o = this.objects.get(key);
    if (!o) return null;
    return { text: async () => o.body, etag: o.etag, customMetadata: { ...o.customMetadata } };
  }

  async put(key: string, body: string, options: Parameters<LogBucket['put']>[2]) {
    const hook = this.beforePut;
    this.beforePut = undefined;
    hook?.(key);
    const current = this.objects.get(key);
    const cond = options.onlyIf;
    const blocked =
      (cond?.etagMatches !== undefined && current?.etag !== cond.etagMatches) ||
      (cond?.etagDoesNotMatch === '*' && current !== undefined) ||
      (cond?.etagDoesNotMatch !== undefined && cond.etagDoesNotMatch !== '*' && current?.etag === cond.etagDoesNotMatch);
    this.puts.push({ key, body, customMetadata: options.customMetadata, written: !blocked });
    if (blocked) return null;
    const stored = { body, etag: `etag-${++this.version}`, customMetadata: { ...options.customMetadata } };
    this.objects.set(key, stored);
    return { key, etag: stored.etag };
  }

  /** Write an object directly (a competing writer). */
  write(key: string, body: string, customMetadata: Record<string, string>): void {
    this.objects.set(key, { body, etag: `etag-${++this.version}`, customMetadata });
  }
}

/** The production R2 archive over an in-memory bucket: the archive the build tests hand the job. */
export function memoryLogArchive(): { archive: R2LogArchive; bucket: MemoryBucket } {
  const bucket = new MemoryBucket();
  return { archive: new R2LogArchive(bucket), bucket };
}

// ---- A harness for driving build jobs against the sandbox with a pinned clock ----

export interface BuildHarnessOptions {
  /** A Depot project per test keeps the sandbox's recorded calls and ListBuilds apart. */
  projectId: string;
  pollIntervalMs?: number;
  /** Wait for Depot's webhook between polls (as DEPOT_WEBHOOK_SECRET turns on), polling every `webhookPollIntervalMs`. */
  awaitWebhook?: boolean;
  webhookPollIntervalMs?: number;
  buildTimeoutMs?: number;
  maxLinesPerRead?: number;
  /** Wrap the adapter (e.g. to crash right after a provider call). */
  wrap?: (service: BuildService) => BuildService;
  start?: Date;
}

export interface BuildHarness {
  relay: RecordingLogRelay;
  archive: R2LogArchive;
  bucket: MemoryBucket;
  depot: DepotBuildService;
  type: JobType<BuildPayload>;
  runner(): Runner;
  now(): Date;
  /** Move the pinned clock on by `ms`, then run every due step. */
  tick(ms?: number): Promise<RunCounts>;
  /** Move the pinned clock on by `ms` without running anything. */
  advance(ms: number): void;
  /**
   * A crash: claim the next due job and run its step's handler (side effects happen) but never
   * settle it, as a process that died before the settle; the lease is left to expire.
   */
  crashStep(): Promise<{ job: Job; result: StepResult | Error }>;
  enqueueBuild(payload: Omit<BuildPayload, 'accountId'> & { accountId?: string }): Promise<Job>;
}

export function buildHarness(sql: Sql, sandbox: SandboxHandle, options: BuildHarnessOptions): BuildHarness {
  const relay = new RecordingLogRelay();
  const { archive, bucket } = memoryLogArchive();
  const depot = new DepotBuildService({
    baseUrl: sandbox.url, token: 'sandbox-token', projectId: options.projectId, maxLinesPerRead: options.maxLinesPerRead,
  });
  const type = buildJobType({
    buildService: options.wrap ? options.wrap(depot) : depot,
    logRelay: relay,
    logArchive: archive,
    pollIntervalMs: options.pollIntervalMs ?? 2000,
    awaitWebhook: options.awaitWebhook,
    webhookPollIntervalMs: options.webhookPollIntervalMs,
    buildTimeoutMs: options.buildTimeoutMs,
  });
  const registry = new JobRegistry([type]);
  let clock = options.start ?? new Date('2026-12-01T10:00:00Z');
  const runner = (): Runner => ({ sql, registry, workerId: `test-${options.projectId}`, clock: () => clock, concurrency: 1 });
  return {
    relay, archive, bucket, depot, type, runner,
    now: () => clock,
    async tick(ms = 0) {
      clock = new Date(clock.getTime() + ms);
      return runSteps(runner());
    },
    advance(ms) {
      clock = new Date(clock.getTime() + ms);
    },
    async crashStep() {
      const [job] = await claimJobs(sql, { workerId: 'doomed', limit: 1, now: clock });
      if (!job) throw new Error('crashStep: nothing was due');
      const ctx: StepContext<BuildPayload> = {
        job, payload: type.payload.parse(job.payload), step: job.step, checkpoint: job.checkpoint, attempt: job.attempts,
        signal: new AbortController().signal, sql, now: () => clock, children: async () => [],
      };
      const result = await type.run(ctx).catch((e: Error) => e);
      return { job, result };
    },
    async enqueueBuild(payload) {
      // A push carries its account, which must own the service: without one, the test's account
      // and a service it owns (created unless the test made the service itself).
      const full = { accountId: TEST_ACCOUNT, ...payload };
      if (payload.accountId === undefined) await seedService(sql, full.serviceId);
      return (await enqueue(sql, { type: 'build', payload: full }, { now: clock })).job;
    },
  };
}

export async function scriptBuild(sandbox: SandboxHandle, script: Record<string, unknown>): Promise<void> {
  await sandboxControl(sandbox, 'POST', '/script', script);
}

export async function sandboxControl(sandbox: SandboxHandle, method: string, path: string, body?: unknown): Promise<unknown> {
  const res = await fetch(`${sandbox.url}/_sandbox/depot${path}`, {
    method, headers: { 'content-type': 'application/json' }, ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`sandbox ${method} ${path}: ${res.status} ${text}`);
  return res.headers.get('content-type')?.includes('json') ? JSON.parse(text) : text;
}

/** The sandbox's whole log of a build, as its GetBuildStepLogs pages add up to. */
export async function sandboxLog(sandbox: SandboxHandle, depotBuildId: string): Promise<string> {
  return (await sandboxControl(sandbox, 'GET', `/builds/${depotBuildId}/log`)) as string;
}

/** Recorded Depot calls of one RPC, e.g. 'CreateBuild', optionally only those whose body matches. */
export function depotCalls(sandbox: SandboxHandle, method: string, body: Record<string, unknown> = {}): RecordedCall[] {
  return sandbox.calls('depot').filter((c) => c.path.endsWith(`/${method}`)
    && Object.entries(body).every(([k, v]) => (c.body as Record<string, unknown> | null)?.[k] === v));
}

/** A build test file's database and sandbox, made before its tests run. */
export function buildTestContext(): { db: TestDatabase; sandbox: SandboxHandle } {
  const context = {} as { db: TestDatabase; sandbox: SandboxHandle };
  beforeAll(async () => {
    context.db = await createTestDatabase();
    context.sandbox = await createTestSandbox();
  });
  return context;
}
