import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg, totalmem } from 'node:os';
import { dirname } from 'node:path';
import type { BurnDownResult, SteadyResult } from './modes.ts';
import type { ServerDescription } from './server.ts';
import { median, medianRun } from './stats.ts';

export interface Machine {
  nproc: number;
  cpu: string;
  memoryGiB: number;
  node: string;
  platform: string;
  /** 1-minute load average when sampled: others' work on a shared machine moves wall-clock figures. */
  loadAverage: number;
}

export function machine(): Machine {
  return {
    nproc: availableParallelism(),
    cpu: cpus()[0]?.model ?? 'unknown',
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    platform: `${process.platform} ${process.arch}`,
    loadAverage: Math.round(loadavg()[0]! * 100) / 100,
  };
}

export interface SystemCell {
  name: string;
  version: string;
  config: string;
  burnDown: BurnDownResult[];
  steady: SteadyResult[];
  /** Runs that did not complete, with why. */
  failures: string[];
}

export interface CellSummary {
  name: string;
  version: string;
  jobsPerSec: number | null;
  jobsPerSecRuns: number[];
  steadyP50Ms: number | null;
  steadyP99Ms: number | null;
  /** Lowest offered rate of the steady runs (jobs/s): below the target rate, the producer fell behind. */
  steadyOfferedPerSec: number | null;
  failedRuns: number;
  /** CPU ms per 1,000 burn-down jobs (medians): the bench process (workers) and the server. */
  nodeCpuMs: number | null;
  postgresCpuMs: number | null;
}

/** The median run of each cell: jobs/s by median; steady p50 and p99 from the run with the median p50. */
export function summarize(cell: SystemCell): CellSummary {
  const steadyMid = cell.steady.length ? medianRun(cell.steady, (r) => r.p50Ms) : null;
  return {
    name: cell.name,
    version: cell.version,
    jobsPerSec: cell.burnDown.length ? median(cell.burnDown.map((r) => r.jobsPerSec)) : null,
    jobsPerSecRuns: cell.burnDown.map((r) => Math.round(r.jobsPerSec)),
    steadyP50Ms: steadyMid?.p50Ms ?? null,
    steadyP99Ms: steadyMid?.p99Ms ?? null,
    steadyOfferedPerSec: cell.steady.length ? Math.min(...cell.steady.map((r) => r.offeredPerSec)) : null,
    failedRuns: cell.failures.length,
    nodeCpuMs: cell.burnDown.length ? median(cell.burnDown.map((r) => r.cpu.nodeMs)) : null,
    postgresCpuMs: cell.burnDown.every((r) => r.cpu.postgresMs !== null) && cell.burnDown.length
      ? median(cell.burnDown.map((r) => r.cpu.postgresMs!))
      : null,
  };
}

const fmt = (n: number | null, digits = 0) =>
  n === null || Number.isNaN(n) ? '—' : n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });

/** One table: jobs/s, steady latency, and each row's jobs/s as a multiple of every other system's. */
export function table(summaries: CellSummary[]): string {
  const header = [
    'system', 'version', 'burn-down jobs/s', 'runs', 'pg CPU ms/1k', 'node CPU ms/1k', 'steady p50 ms', 'steady p99 ms', 'offered/s',
    ...summaries.map((s) => `× ${s.name}`),
  ];
  const rows = summaries.map((s) => [
    s.name,
    s.version,
    fmt(s.jobsPerSec),
    [...s.jobsPerSecRuns.map((r) => fmt(r)), ...(s.failedRuns ? [`${s.failedRuns} failed`] : [])].join(' / ') || '—',
    fmt(s.postgresCpuMs),
    fmt(s.nodeCpuMs),
    fmt(s.steadyP50Ms, 1),
    fmt(s.steadyP99Ms, 1),
    fmt(s.steadyOfferedPerSec),
    ...summaries.map((peer) => (s.jobsPerSec && peer.jobsPerSec ? (s.jobsPerSec / peer.jobsPerSec).toFixed(2) : '—')),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => (i < 2 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

export function describeEnvironment(m: Machine, pg: ServerDescription, embedded: boolean): string {
  return [
    `machine: ${m.nproc} cores (${m.cpu}), ${m.memoryGiB} GiB, ${m.platform}, node ${m.node}, load average ${m.loadAverage}`,
    `postgres: ${pg.version}${embedded ? ' (embedded)' : ' (DATABASE_URL)'}`,
    `settings: ${Object.entries(pg.settings).map(([k, v]) => `${k}=${v}`).join(', ')}`,
  ].join('\n');
}

/** Merge `sections` into the results file, so the bench and the scale check keep each other's figures. */
export function writeResults(file: string, sections: Record<string, unknown>): void {
  const previous = existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>) : {};
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify({ ...previous, ...sections }, null, 2)}\n`);
}
