import { setTimeout as sleep } from 'node:timers/promises';
import postgres from 'postgres';
import { settleDatabase, type BenchServer } from './server.ts';
import { cpuPerThousand, sampleCpu } from './cpu.ts';
import { percentile } from './stats.ts';
import type { BenchSettings, BenchSystem, RetentionSettings, SystemInstance } from './systems/types.ts';

export interface BurnDownResult {
  jobs: number;
  /** From the first job's start until the database holds no unsettled job. */
  seconds: number;
  jobsPerSec: number;
  /** Handler runs beyond one per job (a system re-running jobs would show here). */
  extraRuns: number;
  /** CPU per 1,000 jobs from starting the workers to the last settle: this process, and the server. */
  cpu: { nodeMs: number; postgresMs: number | null };
}

export interface SteadyResult {
  sent: number;
  /** Offered rate actually achieved by the producer (jobs/s). */
  offeredPerSec: number;
  /** Enqueue call start → handler start, ms. */
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

/**
 * A fresh database, the system installed into it (running its retention when asked), and a
 * one-connection probe; all torn down after.
 */
export async function withInstance<T>(
  server: BenchServer,
  system: BenchSystem,
  settings: BenchSettings,
  body: (instance: SystemInstance, probe: postgres.Sql) => Promise<T>,
  retention?: RetentionSettings,
): Promise<T> {
  const db = await server.freshDatabase(system.name);
  const probe = postgres(db.url, { max: 1, onnotice: () => {} });
  let instance: SystemInstance | undefined;
  fault = null;
  process.on('uncaughtException', recordFault);
  process.on('unhandledRejection', recordFault);
  try {
    instance = await system.install(db.url, settings, retention);
    return await body(instance, probe);
  } finally {
    await instance?.close().catch((e) => console.error(`${system.name}: close failed:`, e));
    await probe.end({ timeout: 5 });
    await db.drop();
    process.off('uncaughtException', recordFault);
    process.off('unhandledRejection', recordFault);
  }
}

async function unsettled(probe: postgres.Sql, instance: SystemInstance): Promise<number> {
  return instance.unsettled(probe);
}

/**
 * An error a library threw where nobody could catch it (a pool's timer, an event emitter without
 * a listener). It fails the run under way instead of the whole bench.
 */
let fault: unknown = null;
const recordFault = (error: unknown) => {
  fault = error;
};

function raiseFault(): void {
  if (fault === null) return;
  const error = fault;
  fault = null;
  throw error instanceof Error ? error : new Error(String(error));
}

export async function waitFor(what: string, timeoutMs: number, check: () => boolean | Promise<boolean>, everyMs = 10): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while ((raiseFault(), !(await check()))) {
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}


/** Burn-down: `jobs` no-op jobs queued up front, then drained by the system's workers. */
export async function burnDown(server: BenchServer, system: BenchSystem, settings: BenchSettings, jobs: number): Promise<BurnDownResult> {
  return withInstance(server, system, settings, async (instance, probe) => {
    await instance.enqueueBulk(jobs);
    await settleDatabase(probe);
    let runs = 0;
    let first = 0;
    const cpuBefore = sampleCpu(server.postmaster);
    await instance.startWorkers(() => {
      if (runs++ === 0) first = performance.now();
    });
    const timeoutMs = Math.max(60_000, jobs * 2);
    await waitFor('every job to start', timeoutMs, () => runs >= jobs, 5);
    await waitFor('every job to settle', timeoutMs, async () => (await unsettled(probe, instance)) === 0, 5);
    const seconds = (performance.now() - first) / 1000;
    const cpu = cpuPerThousand(cpuBefore, sampleCpu(server.postmaster), jobs);
    return { jobs, seconds, jobsPerSec: jobs / seconds, extraRuns: runs - jobs, cpu };
  });
}

/** Steady: one job at a time at a fixed rate while the workers run; enqueue → start latency. */
export async function steady(
  server: BenchServer,
  system: BenchSystem,
  settings: BenchSettings,
  options: { rate: number; seconds: number },
): Promise<SteadyResult> {
  return withInstance(server, system, settings, async (instance, probe) => {
    await settleDatabase(probe);
    const send = await instance.openProducer();
    const latencies: number[] = [];
    await instance.startWorkers((payload) => {
      if (payload.t !== undefined) latencies.push(performance.now() - payload.t);
    });
    await sleep(500); // workers connected and idle, as a running service would be
    const total = Math.round(options.rate * options.seconds);
    const inFlight = new Set<Promise<void>>();
    const start = performance.now();
    for (let sent = 0; sent < total; ) {
      const due = start + (sent * 1000) / options.rate;
      const now = performance.now();
      if (now < due) {
        await sleep(Math.max(0, Math.min(due - now, 5)));
        continue;
      }
      const p: Promise<void> = send({ t: performance.now() }).finally(() => inFlight.delete(p));
      inFlight.add(p);
      sent++;
    }
    await Promise.all(inFlight);
    const offeredPerSec = total / ((performance.now() - start) / 1000);
    await waitFor('every steady job to start', 60_000, () => latencies.length >= total);
    await waitFor('every steady job to settle', 60_000, async () => (await unsettled(probe, instance)) === 0);
    return {
      sent: total,
      offeredPerSec,
      p50Ms: percentile(latencies, 50),
      p99Ms: percentile(latencies, 99),
      maxMs: percentile(latencies, 100),
    };
  });
}
