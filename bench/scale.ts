import { claimJobs } from '../queue/claim.ts';
import { connect, type Sql } from '../queue/db.ts';
import { insertDueJobs, insertFinishedJobs } from '../queue/driver/benchmark.ts';
import { queueDepth } from '../queue/inspect.ts';
import { pruneFinished } from '../queue/maintenance/prune.ts';
import { migrate } from '../queue/migrate.ts';
import { runSteps } from '../queue/runner.ts';
import { completeJobs } from '../queue/settle.ts';
import { cpuPerThousand, sampleCpu } from './cpu.ts';
import type { BenchArgs } from './args.ts';
import { machine, writeResults } from './report.ts';
import { settleDatabase, type BenchServer } from './server.ts';
import { median, percentile } from './stats.ts';
import { NOOP_TYPE, noopRegistry } from './systems/engine.ts';
import { loopsFor } from './systems/types.ts';

/** Sequential claims timed per scenario (each of `batch` jobs, settled untimed). */
const CLAIM_SAMPLES = 50;
/** Jobs drained by the runners per measurement. */
const DRAIN_JOBS = 20_000;
const LOAD_CHUNK = 100_000;

interface ScaleMeasurement {
  claimP50Ms: number;
  claimP99Ms: number;
  /** Server CPU per claim (mean over the samples): steadier than latency on a shared machine. */
  claimCpuMs: number | null;
  jobsPerSec: number;
  /** Server CPU per 1,000 jobs drained by the runners. */
  drainCpuMs: number | null;
}

/**
 * The history a busy deployment retains: `n` jobs finished over the last six days (inside the
 * default 7-day retention), each with its history (insertFinishedJobs), written in time order in
 * chunks of LOAD_CHUNK jobs, each one set-based statement.
 */
async function loadFinished(sql: Sql, n: number): Promise<void> {
  for (let from = 0; from < n; from += LOAD_CHUNK) {
    const to = Math.min(n, from + LOAD_CHUNK);
    await insertFinishedJobs(sql, NOOP_TYPE, { from, to, n });
    process.stdout.write(`\r  loading finished jobs: ${to.toLocaleString('en-US')} / ${n.toLocaleString('en-US')}`);
  }
  process.stdout.write('\n');
}

/** Claim latency (one claimer, sequential) and runner jobs/s over `DRAIN_JOBS` jobs. */
async function measure(url: string, args: BenchArgs, postmaster: number | null): Promise<ScaleMeasurement> {
  const { settings } = args;
  const probe = connect(url, { max: 1, applicationName: 'bench-scale-probe' });
  const timings: number[] = [];
  let claimCpu: number | null = 0;
  try {
    for (let i = 0; i < CLAIM_SAMPLES; i++) {
      const before = sampleCpu(postmaster);
      const started = performance.now();
      const jobs = await claimJobs(probe, { workerId: 'probe', limit: settings.batch });
      timings.push(performance.now() - started);
      const after = sampleCpu(postmaster);
      claimCpu = claimCpu === null || before.postgresMs === null || after.postgresMs === null ? null : claimCpu + after.postgresMs - before.postgresMs;
      await completeJobs(probe, jobs.map((job) => ({ job, result: null })));
    }
  } finally {
    await probe.end({ timeout: 5 });
  }
  const workers = connect(url, { max: settings.connections, applicationName: 'bench-scale' });
  try {
    const registry = noopRegistry(() => {});
    const { loops, perLoop } = loopsFor(settings);
    const cpuBefore = sampleCpu(postmaster);
    const started = performance.now();
    await Promise.all(
      Array.from({ length: loops }, (_, i) =>
        runSteps({ sql: workers, registry, workerId: `scale-${i}`, concurrency: perLoop }, { maxJobs: Math.ceil(DRAIN_JOBS / loops) }),
      ),
    );
    const seconds = (performance.now() - started) / 1000;
    const drained = Math.ceil(DRAIN_JOBS / loops) * loops;
    return {
      claimP50Ms: percentile(timings, 50),
      claimP99Ms: percentile(timings, 99),
      claimCpuMs: claimCpu === null ? null : claimCpu / CLAIM_SAMPLES,
      jobsPerSec: drained / seconds,
      drainCpuMs: cpuPerThousand(cpuBefore, sampleCpu(postmaster), drained).postgresMs,
    };
  } finally {
    await workers.end({ timeout: 5 });
  }
}

const DAY_MS = 86_400_000;

export interface DayPrune {
  /** Jobs and events deleted: the oldest of the six loaded days. */
  jobs: number;
  events: number;
  /** pruneFinished passes (each at most 10,000 jobs and 10,000 events, as the tick runs it) until one deleted nothing. */
  passes: number;
  seconds: number;
  /** The first pass alone: one tick's share of the work. */
  firstPassMs: number;
  postgresCpuMs: number | null;
}

/**
 * Prune a day of history: the maintenance tick's pruneFinished with a retention of five days (of
 * the six loaded) before the moment it starts, repeated until a pass deletes nothing, as
 * successive ticks would. Run last: it deletes the loaded table's oldest day.
 */
async function measureDayPrune(url: string, postmaster: number | null): Promise<DayPrune> {
  const sql = connect(url, { max: 1, applicationName: 'bench-scale-prune' });
  try {
    // One pinned instant for every pass: on the database's moving clock the oldest day's edge
    // advances while the passes run (10M jobs over six days age past it at about 20 a second), so
    // a pass that deletes nothing would never come.
    const now = new Date();
    const retention = { finishedRetentionMs: 5 * DAY_MS, failedRetentionMs: 5 * DAY_MS, eventRetentionMs: 5 * DAY_MS, now };
    const cpuBefore = sampleCpu(postmaster);
    const started = performance.now();
    let firstPassMs = 0;
    let jobs = 0;
    let events = 0;
    let passes = 0;
    for (;;) {
      const passStarted = performance.now();
      const counts = await pruneFinished(sql, retention);
      if (passes++ === 0) firstPassMs = performance.now() - passStarted;
      jobs += counts.jobs;
      events += counts.events;
      if (passes % 50 === 0) process.stdout.write(`\r  pruning: ${passes} passes, ${jobs.toLocaleString('en-US')} jobs, ${events.toLocaleString('en-US')} events`);
      if (counts.jobs === 0 && counts.events === 0) break;
    }
    const seconds = (performance.now() - started) / 1000;
    const after = sampleCpu(postmaster);
    if (passes >= 50) process.stdout.write('\n');
    return {
      jobs,
      events,
      passes,
      seconds,
      firstPassMs,
      postgresCpuMs: cpuBefore.postgresMs === null || after.postgresMs === null ? null : after.postgresMs - cpuBefore.postgresMs,
    };
  } finally {
    await sql.end({ timeout: 5 });
  }
}

const describePrune = (p: DayPrune) =>
  `pruned a day of history (${p.jobs.toLocaleString('en-US')} jobs, ${p.events.toLocaleString('en-US')} events) in ${p.passes} passes, ` +
  `${p.seconds.toFixed(2)} s (first pass ${p.firstPassMs.toFixed(0)} ms), server CPU ${p.postgresCpuMs === null ? '?' : (p.postgresCpuMs / 1000).toFixed(2)} s`;

const describe = (m: ScaleMeasurement) =>
  `claim p50 ${m.claimP50Ms.toFixed(2)} ms, p99 ${m.claimP99Ms.toFixed(2)} ms, server CPU ${m.claimCpuMs?.toFixed(2) ?? '?'} ms per claim; ` +
  `${Math.round(m.jobsPerSec)} jobs/s, server CPU ${m.drainCpuMs?.toFixed(0) ?? '?'} ms per 1k jobs`;

async function prepare(url: string): Promise<Sql> {
  const sql = connect(url, { max: 1, applicationName: 'bench-scale-loader' });
  await migrate(sql);
  await noopRegistry(() => {}).sync(sql);
  return sql;
}

const perRun = (args: BenchArgs) => CLAIM_SAMPLES * args.settings.batch + DRAIN_JOBS + args.settings.concurrency;

/**
 * Claim latency and jobs/s with an empty table vs. one holding `scaleFinished` finished and
 * `scaleQueued` queued jobs with their events. Both are vacuumed, analyzed and checkpointed once
 * after loading (the state autovacuum keeps a live table in); autovacuum then runs as configured.
 */
export async function runScaleCheck(server: BenchServer, args: BenchArgs): Promise<void> {
  const need = perRun(args);
  if (args.scaleQueued < need * args.runs) throw new Error(`--scale-queued must be at least ${need * args.runs} for ${args.runs} runs`);
  const empty: ScaleMeasurement[] = [];
  for (let run = 1; run <= args.runs; run++) {
    const db = await server.freshDatabase('scale_empty');
    const sql = await prepare(db.url);
    try {
      await insertDueJobs(sql, NOOP_TYPE, need);
      await settleDatabase(sql);
      const m = await measure(db.url, args, server.postmaster);
      empty.push(m);
      console.log(`  empty run ${run}: ${describe(m)}`);
    } finally {
      await sql.end({ timeout: 5 });
      await db.drop();
    }
  }
  const loaded: ScaleMeasurement[] = [];
  const db = await server.freshDatabase('scale_loaded');
  const sql = await prepare(db.url);
  let sizes: Record<string, string> = {};
  let dayPrune: DayPrune | null = null;
  let loadSeconds = 0;
  try {
    const t0 = performance.now();
    await loadFinished(sql, args.scaleFinished);
    await insertDueJobs(sql, NOOP_TYPE, args.scaleQueued);
    await settleDatabase(sql);
    loadSeconds = (performance.now() - t0) / 1000;
    console.log(`  loaded ${args.scaleFinished} finished + ${args.scaleQueued} queued jobs in ${loadSeconds.toFixed(0)} s`);
    for (let run = 1; run <= args.runs; run++) {
      const m = await measure(db.url, args, server.postmaster);
      loaded.push(m);
      console.log(`  loaded run ${run}: ${describe(m)}`);
    }
    const rows = await sql`
      select c.relname as name, pg_size_pretty(pg_total_relation_size(c.oid)) as size
        from pg_class c join pg_namespace n on n.oid = c.relnamespace
       where n.nspname = 'worker' and c.relname in ('jobs', 'job_events')`;
    sizes = Object.fromEntries(rows.map((r) => [r.name as string, r.size as string]));
    const counts = new Map<string, number>();
    for (const d of await queueDepth(sql)) counts.set(d.status, (counts.get(d.status) ?? 0) + d.count);
    console.log(`  loaded table: ${[...counts].map(([status, n]) => `${n} ${status}`).join(', ')}; sizes ${JSON.stringify(sizes)}`);
    dayPrune = await measureDayPrune(db.url, server.postmaster);
    console.log(`  ${describePrune(dayPrune)}`);
  } finally {
    await sql.end({ timeout: 5 });
    await db.drop();
  }
  const mid = (ms: ScaleMeasurement[], key: (m: ScaleMeasurement) => number | null) =>
    ms.every((m) => key(m) !== null) ? median(ms.map((m) => key(m)!)) : null;
  const summary = (ms: ScaleMeasurement[]) => ({
    claimP50Ms: median(ms.map((m) => m.claimP50Ms)),
    claimP99Ms: median(ms.map((m) => m.claimP99Ms)),
    claimCpuMs: mid(ms, (m) => m.claimCpuMs),
    jobsPerSec: median(ms.map((m) => m.jobsPerSec)),
    drainCpuMs: mid(ms, (m) => m.drainCpuMs),
  });
  const e = summary(empty);
  const l = summary(loaded);
  const ratio = (a: number | null, b: number | null) => (a === null || b === null ? null : a / b);
  const ratios = {
    claimP50: l.claimP50Ms / e.claimP50Ms,
    claimP99: l.claimP99Ms / e.claimP99Ms,
    claimCpu: ratio(l.claimCpuMs, e.claimCpuMs),
    jobsPerSec: e.jobsPerSec / l.jobsPerSec,
    drainCpu: ratio(l.drainCpuMs, e.drainCpuMs),
  };
  const f = (n: number | null, d = 2) => (n === null ? '?' : n.toFixed(d));
  const row = (label: string, x: typeof e) =>
    `${label.padEnd(34)}${f(x.claimP50Ms).padStart(12)}${f(x.claimP99Ms).padStart(14)}${f(x.claimCpuMs).padStart(16)}` +
    `${String(Math.round(x.jobsPerSec)).padStart(9)}${f(x.drainCpuMs, 0).padStart(18)}`;
  console.log(`
scenario                          claim p50 ms  claim p99 ms  claim CPU ms  jobs/s  CPU ms/1k jobs
${row('empty table', e)}
${row(`${args.scaleFinished} finished + ${args.scaleQueued} queued`, l)}
ratio, loaded / empty (target <= 1.2): claim p50 ${f(ratios.claimP50)}, claim p99 ${f(ratios.claimP99)}, claim CPU ${f(ratios.claimCpu)}, ` +
    `jobs/s ${f(ratios.jobsPerSec)} (empty / loaded), CPU per job ${f(ratios.drainCpu)}
`);
  if (dayPrune) console.log(`${describePrune(dayPrune)} at ${args.scaleFinished} finished jobs\n`);
  writeResults(args.out, {
    scale: { at: new Date().toISOString(), machine: machine(), args, loadSeconds, empty, loaded, sizes, dayPrune, summary: { empty: e, loaded: l, ratios } },
  });
  console.log(`wrote the scale section of ${args.out}`);
}
