import { setTimeout as sleep } from 'node:timers/promises';
import type { Sql } from '../queue/db.ts';
import { finishCounts, jobTimes, type JobTimes as JobRow } from '../queue/driver/benchmark.ts';
import type { LaunchedDevStack } from '../scripts/lib/dev-stack.ts';
import { cpuPerThousand, processTreeTicks, sampleCpu, treeCpuPerThousand, type CpuSample } from './cpu.ts';

// What every end-to-end part shares: the stack it drives over HTTP, the job type, waiting for
// jobs to settle, reading their times from their rows, and the CPU of the stack's processes.

/** A built-in sample type every deployment registers: one step, no I/O. */
export const JOB_TYPE = 'uppercase';
/** The end of every job of a run, after which the run has failed: a minute tick plus its 20 s budget fits. */
export const SETTLE_TIMEOUT_MS = 150_000;

export interface E2eCpu {
  /** Per 1,000 jobs, ms: the Postgres server, workerd, wrangler's Node process, the rest of `npm start` (sandbox), this process. */
  postgresMs: number | null;
  workerdMs: number;
  wranglerMs: number;
  devScriptMs: number;
  benchMs: number;
}

/** Where a job's time went, from its row: creation (enqueue transaction) → first claim → finished. */
export interface JobTimes {
  /** HTTP call start (this process) → created_at. */
  toCreatedMs: number[];
  /** created_at → started_at (first claim): the kick (or the tick) finding it. */
  createdToClaimMs: number[];
  /** started_at → finished_at: the step and its settle. */
  claimToFinishedMs: number[];
}

export interface Stack {
  api: LaunchedDevStack['api'];
  baseUrl: string;
  probe: Sql;
  rootPid: number;
  postmaster: number | null;
}

export const wallNow = () => performance.timeOrigin + performance.now();

/** The first requests of an isolate compile and sync the registry: a few jobs, untimed, before any run. */
export async function warmUp(stack: Stack): Promise<void> {
  const ids: string[] = [];
  for (let i = 0; i < 10; i++) ids.push((await enqueueOne(stack)).id);
  await waitSettled(stack, ids, 60_000);
}

export async function enqueueOne(stack: Stack): Promise<{ id: string; startedAt: number; httpMs: number }> {
  const startedAt = wallNow();
  const t = performance.now();
  const res = await stack.api('/v1/jobs', { method: 'POST', body: JSON.stringify({ type: JOB_TYPE, payload: { text: 'e2e' } }) });
  const httpMs = performance.now() - t;
  if (res.status !== 201) throw new Error(`POST /v1/jobs answered ${res.status}: ${await res.text()}`);
  const { job } = (await res.json()) as { job: { id: string } };
  return { id: job.id, startedAt, httpMs };
}

export async function waitSettled(stack: Stack, ids: string[], timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const row = await finishCounts(stack.probe, ids);
    if (row.bad > 0) throw new Error(`${row.bad} jobs ended other than done`);
    if (row.open === 0) return;
    if (performance.now() > deadline) throw new Error(`${row.open} of ${ids.length} jobs not finished after ${timeoutMs / 1000} s`);
    await sleep(20);
  }
}

/** Epoch ms (fractional) of the jobs' rows, and how many invocations claimed them. */
export async function jobRows(stack: Stack, ids: string[]): Promise<{ rows: JobRow[]; invocations: number }> {
  return jobTimes(stack.probe, ids);
}

export function sampleAll(stack: Stack): { own: CpuSample; tree: Record<string, number> } {
  return { own: sampleCpu(stack.postmaster), tree: processTreeTicks(stack.rootPid) };
}

export function cpuBetween(before: ReturnType<typeof sampleAll>, after: ReturnType<typeof sampleAll>, jobs: number): E2eCpu {
  const own = cpuPerThousand(before.own, after.own, jobs);
  const tree = treeCpuPerThousand(before.tree, after.tree, jobs);
  return { postgresMs: own.postgresMs, workerdMs: tree.workerd!, wranglerMs: tree.wrangler!, devScriptMs: tree.other!, benchMs: own.nodeMs };
}

/** The cron driver of `npm start` fires the tick on every wall-clock minute. */
export const minuteBetween = (from: number, to: number) => Math.floor(to / 60_000) > Math.floor(from / 60_000);

export function splitTimes(rows: JobRow[], callStart: Map<string, number>): JobTimes {
  return {
    toCreatedMs: rows.filter((r) => callStart.has(r.id)).map((r) => r.created - callStart.get(r.id)!),
    createdToClaimMs: rows.map((r) => r.started - r.created),
    claimToFinishedMs: rows.map((r) => r.finished - r.started),
  };
}
