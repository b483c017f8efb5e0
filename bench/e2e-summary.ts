import type { BurnDownResult, SteadyResult } from './modes.ts';
import type { E2eBurnDownResult, E2eTickDrainResult } from './e2e-burn-down.ts';
import type { E2eSteadyResult } from './e2e-steady.ts';
import { median, medianRun } from './stats.ts';

// The end-to-end run's table: the Node runner beside the Worker's paths, medians of the runs.

export interface E2eSummaryRow {
  path: string;
  jobsPerSec: number | null;
  jobsPerSecRuns: number[];
  enqueuePerSec: number | null;
  /** CPU ms per 1,000 burn-down jobs (medians): the server, and the Worker's processes (workerd + wrangler). */
  postgresCpuMs: number | null;
  workerCpuMs: number | null;
  steadyP50Ms: number | null;
  steadyP99Ms: number | null;
  httpP50Ms: number | null;
  httpP99Ms: number | null;
  offeredPerSec: number | null;
  failedRuns: number;
}

const medianOf = <T>(runs: T[], key: (r: T) => number | null): number | null => {
  const values = runs.map(key).filter((v): v is number => v !== null);
  return values.length ? median(values) : null;
};

export function summarizeE2e(
  node: { burnDown: BurnDownResult[]; steady: SteadyResult[]; failures: string[] },
  worker: { burnDown: E2eBurnDownResult[]; tickDrain: E2eTickDrainResult[]; steady: E2eSteadyResult[]; failures: string[] },
): E2eSummaryRow[] {
  const nodeSteady = node.steady.length ? medianRun(node.steady, (r) => r.p50Ms) : null;
  const workerSteady = worker.steady.length ? medianRun(worker.steady, (r) => r.p50Ms) : null;
  const none = { enqueuePerSec: null, steadyP50Ms: null, steadyP99Ms: null, httpP50Ms: null, httpP99Ms: null, offeredPerSec: null };
  return [
    {
      path: 'Node runner (runSteps in-process)',
      ...none,
      jobsPerSec: medianOf(node.burnDown, (r) => r.jobsPerSec),
      jobsPerSecRuns: node.burnDown.map((r) => Math.round(r.jobsPerSec)),
      postgresCpuMs: medianOf(node.burnDown, (r) => r.cpu.postgresMs),
      workerCpuMs: medianOf(node.burnDown, (r) => r.cpu.nodeMs),
      steadyP50Ms: nodeSteady?.p50Ms ?? null,
      steadyP99Ms: nodeSteady?.p99Ms ?? null,
      offeredPerSec: node.steady.length ? Math.min(...node.steady.map((r) => r.offeredPerSec)) : null,
      failedRuns: node.failures.length,
    },
    {
      path: 'Worker: HTTP batches + kicks (+ tick)',
      jobsPerSec: medianOf(worker.burnDown, (r) => r.jobsPerSec),
      jobsPerSecRuns: worker.burnDown.map((r) => Math.round(r.jobsPerSec)),
      enqueuePerSec: medianOf(worker.burnDown, (r) => r.enqueuePerSec),
      postgresCpuMs: medianOf(worker.burnDown, (r) => r.cpu.postgresMs),
      workerCpuMs: medianOf(worker.burnDown, (r) => r.cpu.workerdMs + r.cpu.wranglerMs),
      steadyP50Ms: workerSteady?.p50Ms ?? null,
      steadyP99Ms: workerSteady?.p99Ms ?? null,
      httpP50Ms: workerSteady?.httpP50Ms ?? null,
      httpP99Ms: workerSteady?.httpP99Ms ?? null,
      offeredPerSec: worker.steady.length ? Math.min(...worker.steady.map((r) => r.offeredPerSec)) : null,
      failedRuns: worker.failures.filter((f) => !f.startsWith('tick')).length,
    },
    {
      path: 'Worker: one tick, pre-queued by SQL',
      ...none,
      jobsPerSec: medianOf(worker.tickDrain, (r) => r.jobsPerSec),
      jobsPerSecRuns: worker.tickDrain.map((r) => Math.round(r.jobsPerSec)),
      postgresCpuMs: medianOf(worker.tickDrain, (r) => r.cpu.postgresMs),
      workerCpuMs: medianOf(worker.tickDrain, (r) => r.cpu.workerdMs + r.cpu.wranglerMs),
      failedRuns: worker.failures.filter((f) => f.startsWith('tick')).length,
    },
  ];
}

const fmt = (n: number | null, digits = 0) =>
  n === null || Number.isNaN(n) ? '—' : n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });

export function e2eTable(rows: E2eSummaryRow[]): string {
  const header = [
    'path', 'burn-down jobs/s', 'runs', 'HTTP enqueue jobs/s', 'pg CPU ms/1k', 'runner CPU ms/1k',
    'enqueue→claim p50 ms', 'p99 ms', 'POST p50 ms', 'POST p99 ms', 'offered/s',
  ];
  const cells = rows.map((r) => [
    r.path,
    fmt(r.jobsPerSec),
    [...r.jobsPerSecRuns.map((n) => fmt(n)), ...(r.failedRuns ? [`${r.failedRuns} failed`] : [])].join(' / ') || '—',
    fmt(r.enqueuePerSec),
    fmt(r.postgresCpuMs),
    fmt(r.workerCpuMs),
    fmt(r.steadyP50Ms, 1),
    fmt(r.steadyP99Ms, 1),
    fmt(r.httpP50Ms, 1),
    fmt(r.httpP99Ms, 1),
    fmt(r.offeredPerSec),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const line = (c: string[]) => c.map((v, i) => (i === 0 ? v.padEnd(widths[i]!) : v.padStart(widths[i]!))).join('  ');
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...cells.map(line)].join('\n');
}
