import { spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import postgres from 'postgres';
import { PROJECT_ROOT } from '../scripts/lib/cli.ts';
import type { BenchArgs } from './args.ts';
import { cpuPerThousand, processTreeTicks, sampleCpu, treeCpuPerThousand } from './cpu.ts';
import { onInterrupt } from './interrupt.ts';
import { burnDown, type BurnDownResult } from './modes.ts';
import { machine, writeResults } from './report.ts';
import { settleDatabase, type BenchServer } from './server.ts';
import { median } from './stats.ts';
import { engineSystem } from './systems/engine.ts';
import { engineVersion } from './versions.ts';

/**
 * `npm run bench -- --cli`: `npm run worker -- --drain` as a user runs it (a child process, its
 * own defaults) against the bench's in-process runner (the starbase system: `runSteps` in this
 * process at the bench's settings), on the same jobs, the same server, interleaved run by run.
 * Each CLI variant is a list of extra worker arguments: none (its defaults), then `--cli-args`.
 */

export interface CliBurnDownResult {
  jobs: number;
  /** From the first step's log line until the database holds no unsettled job. */
  seconds: number;
  jobsPerSec: number;
  /** Lines after 'worker started' beyond one per job (a step run twice, an alert; the last, 'worker stopped', is not counted). */
  extraRuns: number;
  /** From spawning `npm run worker` to its first step (npm, node and tsx starting; the registry sync). */
  startSeconds: number;
  /** Server CPU per 1,000 jobs from the first step to the last settle (every database of the server). */
  postgresCpuMs: number | null;
  /** The worker's CPU (npm and node) per 1,000 jobs, from its first step to the last settle. */
  workerCpuMs: number | null;
  /** The 'worker started' line: the settings the worker reports. */
  started: Record<string, unknown> | null;
}

const TYPES_MODULE = 'bench/cli-job-types.ts';

export async function runCli(server: BenchServer, args: BenchArgs): Promise<void> {
  const variants: { label: string; argv: string[] }[] = [{ label: 'CLI defaults', argv: [] }];
  if (args.cli.args.length) variants.push({ label: `CLI ${args.cli.args.join(' ')}`, argv: args.cli.args });
  const system = engineSystem(engineVersion());
  console.log(
    `CLI: npm run worker -- --drain --types ${TYPES_MODULE} [args] over ${args.jobs} queued jobs, ${args.runs} runs; ` +
      `beside: ${system.name} in process (${system.describe(args.settings)})`,
  );
  const inProcess: BurnDownResult[] = [];
  const cli = variants.map(() => [] as CliBurnDownResult[]);
  const failures: string[] = [];
  for (let run = 1; run <= args.runs; run++) {
    try {
      const r = await burnDown(server, system, args.settings, args.jobs);
      inProcess.push(r);
      console.log(`  in-process run ${run}: ${Math.round(r.jobsPerSec)} jobs/s (${r.seconds.toFixed(2)} s), CPU per 1k jobs: server ${r.cpu.postgresMs?.toFixed(0) ?? '?'} ms, node ${r.cpu.nodeMs.toFixed(0)} ms`);
    } catch (error) {
      failures.push(`in-process run ${run}: ${(error as Error).message}`);
      console.log(`  in-process run ${run} FAILED: ${(error as Error).message}`);
    }
    for (const [i, variant] of variants.entries()) {
      try {
        const r = await cliBurnDown(server, args, variant.argv);
        cli[i]!.push(r);
        console.log(
          `  ${variant.label} run ${run}: ${Math.round(r.jobsPerSec)} jobs/s (${r.seconds.toFixed(2)} s; first step ${r.startSeconds.toFixed(2)} s after spawn), ` +
            `CPU per 1k jobs: server ${r.postgresCpuMs?.toFixed(0) ?? '?'} ms, worker ${r.workerCpuMs?.toFixed(0) ?? '?'} ms${r.extraRuns ? `, ${r.extraRuns} extra runs` : ''}`,
        );
      } catch (error) {
        failures.push(`${variant.label} run ${run}: ${(error as Error).message}`);
        console.log(`  ${variant.label} run ${run} FAILED: ${(error as Error).message}`);
      }
    }
  }
  const base = inProcess.length ? median(inProcess.map((r) => r.jobsPerSec)) : null;
  const rows = [
    { label: 'in-process runner', perSec: base, runs: inProcess.map((r) => r.jobsPerSec) },
    ...variants.map((v, i) => ({ label: v.label, perSec: cli[i]!.length ? median(cli[i]!.map((r) => r.jobsPerSec)) : null, runs: cli[i]!.map((r) => r.jobsPerSec) })),
  ];
  console.log('');
  for (const row of rows) {
    const ratio = row.perSec !== null && base ? ` = ${(row.perSec / base).toFixed(2)}× in-process` : '';
    console.log(`  ${row.label.padEnd(28)} ${row.perSec === null ? '-' : Math.round(row.perSec)} jobs/s median (${row.runs.map(Math.round).join(' / ')})${ratio}`);
  }
  for (const [i, v] of variants.entries()) {
    const started = cli[i]![0]?.started;
    if (started) console.log(`  ${v.label} reported: ${JSON.stringify(started)}`);
  }
  console.log(`\nload average at the end: ${machine().loadAverage}`);
  writeResults(args.out, {
    cli: {
      at: new Date().toISOString(), machine: machine(), postgres: await server.describe(), embedded: server.embedded,
      jobs: args.jobs, runs: args.runs, settings: args.settings, inProcess,
      variants: variants.map((v, i) => ({ ...v, runs: cli[i] })), failures,
    },
  });
  console.log(`wrote ${args.out}`);
}

/** One burn-down by the CLI: jobs queued with the bench's bulk loader, then `npm run worker -- --drain`. */
async function cliBurnDown(server: BenchServer, args: BenchArgs, extra: string[]): Promise<CliBurnDownResult> {
  const db = await server.freshDatabase('cli');
  const probe = postgres(db.url, { max: 1, onnotice: () => {} });
  // the in-process system's install: migrations, the no-op type, and its bulk loader
  const instance = await engineSystem(engineVersion()).install(db.url, args.settings);
  let child: ReturnType<typeof spawn> | undefined;
  const removeInterrupt = onInterrupt('stopping the CLI worker', [() => child?.kill('SIGTERM'), () => probe.end({ timeout: 5 }), () => db.drop()]);
  try {
    await instance.enqueueBulk(args.jobs);
    await settleDatabase(probe);
    // sampled at the first step: the server's work (and other databases') while the worker starts is not counted
    let cpuBefore = sampleCpu(server.postmaster);
    const spawnedAt = performance.now();
    child = spawn('npm', ['run', '-s', 'worker', '--', '--drain', '--types', TYPES_MODULE, ...extra], {
      cwd: PROJECT_ROOT,
      env: { ...process.env, DATABASE_URL: db.url, WRANGLER_SEND_METRICS: 'false' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let first = 0;
    let ticksAtFirst: Record<string, number> = {};
    let steps = 0;
    let started: Record<string, unknown> | null = null;
    let stderr = '';
    child.stderr!.on('data', (d) => (stderr = (stderr + d).slice(-4000)));
    // The worker's first line says it started, then one line per step once the step is settled.
    // Newlines are counted in the raw chunks (this process shares the machine with the worker:
    // splitting and decoding every line would take CPU from it); only the first line is read.
    let lines = 0;
    let head = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      if (lines === 0) head += chunk.toString();
      for (let at = chunk.indexOf(10); at !== -1; at = chunk.indexOf(10, at + 1)) lines++;
      if (started === null && lines > 0) started = JSON.parse(head.slice(0, head.indexOf('\n'))) as Record<string, unknown>;
      steps = Math.max(0, lines - 1);
      if (first === 0 && steps > 0) {
        first = performance.now();
        ticksAtFirst = processTreeTicks(child!.pid!);
        cpuBefore = sampleCpu(server.postmaster);
      }
    });
    let exitCode: number | null | undefined;
    // 'close': the process has exited and its output has been read to the end (every step line counted)
    const exited = new Promise<number | null>((resolve) => child!.on('close', (code) => resolve((exitCode = code))));
    const timeoutMs = Math.max(60_000, args.jobs * 2);
    const deadline = performance.now() + timeoutMs;
    const check = async (what: string, done: () => boolean | Promise<boolean>) => {
      while (!(await done())) {
        if (exitCode !== undefined) throw new Error(`the worker exited ${exitCode} before ${what}: ${stderr.trim()}`);
        if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
        await sleep(5);
      }
    };
    // As the in-process burn-down: the database is read only once every job has run (a count of
    // unsettled jobs every 5 ms while they run would cost the server more than the jobs do).
    await check('every job to run', () => steps >= args.jobs);
    // Now, while the worker still runs (its last claim finds nothing, then it exits): once it has
    // exited its CPU is no longer in /proc.
    const ticksAtLast = processTreeTicks(child.pid!);
    await check('every job to settle', async () => (await instance.unsettled(probe)) === 0);
    const seconds = (performance.now() - first) / 1000;
    const cpuAfter = sampleCpu(server.postmaster);
    const workerCpu = Object.values(treeCpuPerThousand(ticksAtFirst, ticksAtLast, args.jobs)).reduce((a, b) => a + b, 0);
    const code = await exited;
    if (code !== 0) throw new Error(`the worker exited ${code}: ${stderr.trim()}`);
    return {
      jobs: args.jobs,
      seconds,
      jobsPerSec: args.jobs / seconds,
      extraRuns: lines - 2 - args.jobs, // less 'worker started' and 'worker stopped'
      startSeconds: (first - spawnedAt) / 1000,
      postgresCpuMs: cpuPerThousand(cpuBefore, cpuAfter, args.jobs).postgresMs,
      workerCpuMs: workerCpu >= 0 ? workerCpu : null, // negative: it had exited after all
      started,
    };
  } finally {
    removeInterrupt();
    child?.kill('SIGTERM');
    await instance.close().catch(() => {});
    await probe.end({ timeout: 5 });
    await db.drop();
  }
}
