import { setTimeout as sleep } from 'node:timers/promises';
import type { BenchArgs } from './args.ts';
import { cpuPerThousand, sampleCpu } from './cpu.ts';
import { waitFor, withInstance } from './modes.ts';
import { machine, writeResults } from './report.ts';
import { settleDatabase, type BenchServer } from './server.ts';
import { median, percentile } from './stats.ts';
import { PRODUCER_CONNECTIONS, type BenchSettings, type BenchSystem, type NoopPayload, type RetentionSettings, type RowsLeft } from './systems/types.ts';

/**
 * Sustained mode: a steady load, enqueued in batches with each system's bulk API, while its workers
 * run and its own deletion of finished jobs runs as in production, compressed in time.
 */

/** The producer sends what has fallen due every tick (so at 2,000/s, batches of 20 every 10 ms). */
const PRODUCER_TICK_MS = 10;
/**
 * Retention compressed so that deletion runs many times within a minute's run: finished jobs (and
 * our events) are kept 10 s, and each system's sweep runs every second. In production our tick
 * runs once a minute and keeps days; at this scale a 1 s sweep is the tick's cadence relative to
 * the retention, and every system gets the same.
 */
export const SUSTAINED_RETENTION: RetentionSettings = { retentionSeconds: 10, intervalSeconds: 1 };

export interface SustainedOptions {
  rate: number;
  seconds: number;
}

export interface SustainedResult {
  sent: number;
  /** The rate the producer achieved (jobs/s). */
  offeredPerSec: number;
  /** Jobs started per second, from the producer's start to the last job's start. */
  achievedPerSec: number;
  /** Enqueue call → handler start, ms. */
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** CPU per 1,000 jobs from the producer's start until every job settled (retention included). */
  cpu: { nodeMs: number; postgresMs: number | null };
  /** Rows the system held at the end: what its deletion left (about `retentionSeconds` of jobs for a system that keeps them). */
  rowsLeft: RowsLeft;
}

/** One sustained run of one system in a fresh database. */
export async function sustained(
  server: BenchServer,
  system: BenchSystem,
  settings: BenchSettings,
  options: SustainedOptions,
  retention: RetentionSettings = SUSTAINED_RETENTION,
): Promise<SustainedResult> {
  return withInstance(
    server,
    system,
    settings,
    async (instance, probe) => {
      await settleDatabase(probe);
      const send = await instance.openBulkProducer();
      const latencies: number[] = [];
      let lastStart = 0;
      await instance.startWorkers((payload) => {
        lastStart = performance.now();
        if (payload.t !== undefined) latencies.push(lastStart - payload.t);
      });
      await sleep(500); // workers connected and idle, as a running service would be
      const total = Math.round(options.rate * options.seconds);
      const inFlight = new Set<Promise<void>>();
      const cpuBefore = sampleCpu(server.postmaster);
      const start = performance.now();
      let sent = 0;
      for (let tick = 1; sent < total; tick++) {
        const due = Math.min(total, Math.floor(((performance.now() - start) * options.rate) / 1000));
        // A producer as wide as the steady one's: a batch waits while every connection is busy.
        if (due > sent && inFlight.size < PRODUCER_CONNECTIONS) {
          const t = performance.now();
          const batch: NoopPayload[] = Array.from({ length: due - sent }, () => ({ t }));
          const p: Promise<void> = send(batch).finally(() => inFlight.delete(p));
          inFlight.add(p);
          sent = due;
        }
        await sleep(Math.max(0, start + tick * PRODUCER_TICK_MS - performance.now()));
      }
      await Promise.all(inFlight);
      const offeredPerSec = total / ((performance.now() - start) / 1000);
      const timeoutMs = 60_000 + options.seconds * 1000;
      await waitFor('every sustained job to start', timeoutMs, () => latencies.length >= total);
      await waitFor('every sustained job to settle', timeoutMs, async () => (await instance.unsettled(probe)) === 0);
      const cpu = cpuPerThousand(cpuBefore, sampleCpu(server.postmaster), total);
      return {
        sent: total,
        offeredPerSec,
        achievedPerSec: total / ((lastStart - start) / 1000),
        p50Ms: percentile(latencies, 50),
        p99Ms: percentile(latencies, 99),
        maxMs: percentile(latencies, 100),
        cpu,
        rowsLeft: await instance.rowsLeft(probe),
      };
    },
    retention,
  );
}

export interface SustainedSummary {
  name: string;
  version: string;
  runs: number;
  failedRuns: number;
  offeredPerSec: number | null;
  achievedPerSec: number | null;
  postgresCpuMs: number | null;
  nodeCpuMs: number | null;
  p50Ms: number | null;
  p99Ms: number | null;
  /** Rows left at the end of the last run. */
  rowsLeft: RowsLeft | null;
}

/** Medians of each figure over the runs (offered: the lowest, so a producer that fell behind shows). */
export function summarizeSustained(name: string, version: string, runs: SustainedResult[], failedRuns: number): SustainedSummary {
  const mid = (key: (r: SustainedResult) => number | null) => {
    const values = runs.map(key);
    return values.length && values.every((v) => v !== null) ? median(values as number[]) : null;
  };
  return {
    name,
    version,
    runs: runs.length,
    failedRuns,
    offeredPerSec: runs.length ? Math.min(...runs.map((r) => r.offeredPerSec)) : null,
    achievedPerSec: mid((r) => r.achievedPerSec),
    postgresCpuMs: mid((r) => r.cpu.postgresMs),
    nodeCpuMs: mid((r) => r.cpu.nodeMs),
    p50Ms: mid((r) => r.p50Ms),
    p99Ms: mid((r) => r.p99Ms),
    rowsLeft: runs.at(-1)?.rowsLeft ?? null,
  };
}

const fmt = (n: number | null | undefined, digits = 0) =>
  n === null || n === undefined || Number.isNaN(n) ? '—' : n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });

const rowsText = (rows: RowsLeft | null) =>
  rows === null ? '—' : rows.events === undefined ? `${fmt(rows.jobs)} jobs` : `${fmt(rows.jobs)} jobs + ${fmt(rows.events)} events`;

/** The sustained table, with each system's CPU per job, p99 and jobs/s as a multiple of `reference`'s. */
export function sustainedTable(summaries: SustainedSummary[], reference = 'graphile-worker'): string {
  const ref = summaries.find((s) => s.name === reference);
  const ratio = (a: number | null, b: number | null | undefined) => (a === null || !b ? '—' : (a / b).toFixed(2));
  const header = [
    'system', 'offered/s', 'achieved jobs/s', 'pg CPU ms/1k', 'node CPU ms/1k', 'p50 ms', 'p99 ms', 'rows left',
    `CPU × ${reference}`, `p99 × ${reference}`, `jobs/s × ${reference}`,
  ];
  const rows = summaries.map((s) => [
    `${s.name}${s.failedRuns ? ` (${s.failedRuns} failed)` : ''}`,
    fmt(s.offeredPerSec),
    fmt(s.achievedPerSec),
    fmt(s.postgresCpuMs),
    fmt(s.nodeCpuMs),
    fmt(s.p50Ms, 1),
    fmt(s.p99Ms, 1),
    rowsText(s.rowsLeft),
    ratio(s.postgresCpuMs, ref?.postgresCpuMs),
    ratio(s.p99Ms, ref?.p99Ms),
    ratio(s.achievedPerSec, ref?.achievedPerSec),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

export const describeSustained = (r: SustainedResult) =>
  `${Math.round(r.achievedPerSec)} jobs/s (${Math.round(r.offeredPerSec)}/s offered), p50 ${r.p50Ms.toFixed(1)} ms, p99 ${r.p99Ms.toFixed(1)} ms, ` +
  `CPU per 1k jobs: postgres ${r.cpu.postgresMs?.toFixed(0) ?? '?'} ms, node ${r.cpu.nodeMs.toFixed(0)} ms; rows left ${rowsText(r.rowsLeft)}`;

/** `--sustained`: every system, `--runs` times interleaved; the table, and the `sustained` key of the results file. */
export async function runSustained(server: BenchServer, args: BenchArgs, systems: BenchSystem[]): Promise<void> {
  const { settings } = args;
  const options = { rate: args.sustained.rate, seconds: args.sustained.seconds };
  const retention = SUSTAINED_RETENTION;
  console.log(
    `sustained: ${options.rate} jobs/s for ${options.seconds} s in batches every ${PRODUCER_TICK_MS} ms (each system's bulk enqueue), ` +
      `retention ${retention.retentionSeconds} s swept every ${retention.intervalSeconds} s; ${args.runs} runs per system, fresh database per run`,
  );
  const runs = new Map(systems.map((s) => [s.name, [] as SustainedResult[]]));
  const failures = new Map(systems.map((s) => [s.name, [] as string[]]));
  for (let run = 1; run <= args.runs; run++) {
    for (const system of systems) {
      try {
        const r = await sustained(server, system, settings, options, retention);
        runs.get(system.name)!.push(r);
        console.log(`  sustained ${system.name} run ${run}: ${describeSustained(r)}`);
      } catch (error) {
        failures.get(system.name)!.push(`run ${run}: ${(error as Error).message}`);
        console.log(`  sustained ${system.name} run ${run} FAILED: ${(error as Error).message}`);
      }
    }
  }
  const summaries = systems.map((s) => summarizeSustained(s.name, s.version, runs.get(s.name)!, failures.get(s.name)!.length));
  console.log(`\n${sustainedTable(summaries)}\n`);
  console.log(`load average at the end: ${machine().loadAverage}`);
  writeResults(args.out, {
    sustained: {
      at: new Date().toISOString(),
      machine: machine(),
      postgres: await server.describe(),
      embedded: server.embedded,
      args,
      retention,
      producerTickMs: PRODUCER_TICK_MS,
      systems: systems.map((s) => ({ name: s.name, version: s.version, config: s.describe(settings), runs: runs.get(s.name), failures: failures.get(s.name) })),
      summaries,
    },
  });
  console.log(`wrote the sustained section of ${args.out}`);
}
