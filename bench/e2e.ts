import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type Sql } from '../queue/db.ts';
import { PROJECT_ROOT } from '../scripts/lib/cli.ts';
import { launchDevStack, type LaunchedDevStack } from '../scripts/lib/dev-stack.ts';
import type { BenchArgs } from './args.ts';
import { workerBurnDown, workerTickDrain, type E2eBurnDownResult, type E2eTickDrainResult } from './e2e-burn-down.ts';
import { JOB_TYPE, warmUp, type Stack } from './e2e-stack.ts';
import { requestOverhead, workerSteady, type E2eRequestOverhead, type E2eSteadyResult } from './e2e-steady.ts';
import { e2eTable, summarizeE2e } from './e2e-summary.ts';
import { onInterrupt, stopInTurn } from './interrupt.ts';
import { burnDown, steady, type BurnDownResult, type SteadyResult } from './modes.ts';
import { machine, writeResults } from './report.ts';
import type { BenchServer } from './server.ts';
import { engineSystem } from './systems/engine.ts';
import { engineVersion } from './versions.ts';

/**
 * `npm run bench -- --e2e`: the engine through the real Worker as `npm start` runs it — wrangler
 * dev (workerd), Hyperdrive's local connection string, the sandbox, the cron driver firing the
 * per-minute tick through wrangler dev's /__scheduled — driven over HTTP only: enqueue with the
 * bearer token, the kick each accepted enqueue drains in waitUntil, and the tick as the safety
 * net. Timings of the jobs come from their rows (Postgres' clock; the bench runs on the same
 * machine, so its wall clock is the same clock). Beside it, the Node runner (`runSteps` in this
 * process, as in the main bench) on the same number of jobs and the same steady rate.
 */

/** Latest output kept from the stack (`npm start` runs wrangler dev at --log-level warn: warnings and errors). */
const OUTPUT_LIMIT = 200_000;

export async function runE2e(server: BenchServer, args: BenchArgs): Promise<void> {
  const { e2e } = args;
  const runs = args.runs;
  console.log(
    `end-to-end: burn-down ${e2e.jobs} ${JOB_TYPE} jobs in batches of ${e2e.batch} (${e2e.inFlight} requests in flight); ` +
      `steady ${e2e.rate}/s for ${e2e.seconds} s, one POST /v1/jobs each; ${runs} runs; beside: the Node runner on the same jobs and rate`,
  );
  const version = engineVersion();
  const workerVars = { ...wranglerVars(['STEP_CONCURRENCY', 'KICK_BUDGET_MS', 'TICK_BUDGET_MS']), ...devVars() };
  console.log(`Worker settings: ${Object.entries(workerVars).map(([k, v]) => `${k}=${v}`).join(', ')} (wrangler.toml [vars], then STARBASE_DEV_VARS)`);
  const node = { burnDown: [] as BurnDownResult[], steady: [] as SteadyResult[], failures: [] as string[] };
  const worker = {
    burnDown: [] as E2eBurnDownResult[],
    tickDrain: [] as E2eTickDrainResult[],
    steady: [] as E2eSteadyResult[],
    overhead: null as E2eRequestOverhead | null,
    failures: [] as string[],
  };

  // The Node runner first (fresh database per run, as in the main bench), while no stack runs.
  const system = engineSystem(version);
  for (let run = 1; run <= runs; run++) {
    for (const mode of args.modes) {
      try {
        if (mode === 'burn-down') {
          const r = await burnDown(server, system, args.settings, e2e.jobs);
          node.burnDown.push(r);
          console.log(`  node burn-down run ${run}: ${Math.round(r.jobsPerSec)} jobs/s (${r.seconds.toFixed(2)} s)`);
        } else {
          const r = await steady(server, system, args.settings, { rate: e2e.rate, seconds: e2e.seconds });
          node.steady.push(r);
          console.log(`  node steady run ${run}: enqueue → start p50 ${r.p50Ms.toFixed(1)} ms, p99 ${r.p99Ms.toFixed(1)} ms`);
        }
      } catch (error) {
        node.failures.push(`${mode} run ${run}: ${(error as Error).message}`);
        console.log(`  node ${mode} run ${run} FAILED: ${(error as Error).message}`);
      }
    }
  }

  // One `npm start` stack for every Worker run (boot takes wrangler's build and workerd's start).
  const db = await server.freshDatabase('e2e');
  const dataDir = mkdtempSync(join(tmpdir(), 'starbase-bench-e2e-'));
  let launched: LaunchedDevStack | undefined;
  let probe: Sql | undefined;
  let closing: Promise<void> | undefined;
  // once: Ctrl-C and the run's own unwinding both wait for the same teardown
  const teardown = () =>
    (closing ??= stopInTurn([() => launched?.stop(), () => probe?.end({ timeout: 5 }), () => db.drop(), () => rmSync(dataDir, { recursive: true, force: true })]));
  const offInterrupt = onInterrupt('stopping the stack', [teardown, () => server.close()]);
  try {
    const booting = performance.now();
    launched = await launchDevStack({ databaseUrl: db.url, dataDir, outputLimit: OUTPUT_LIMIT });
    console.log(`  stack up in ${((performance.now() - booting) / 1000).toFixed(1)} s at ${launched.baseUrl} (wrangler dev, pid ${launched.child.pid})`);
    probe = connect(db.url, { max: 2 });
    const stack: Stack = {
      api: launched.api,
      baseUrl: launched.baseUrl,
      probe,
      rootPid: launched.child.pid!,
      postmaster: server.postmaster,
    };
    await warmUp(stack);
    worker.overhead = await requestOverhead(stack);
    console.log(
      `  one request on the idle stack, p50 of 50: no database ${worker.overhead.noDatabaseP50Ms.toFixed(1)} ms, ` +
        `GET /healthz ${worker.overhead.healthzP50Ms.toFixed(1)} ms, POST /v1/jobs ${worker.overhead.enqueueP50Ms.toFixed(1)} ms`,
    );
    for (let run = 1; run <= runs; run++) {
      for (const mode of args.modes) {
        try {
          if (mode === 'burn-down') {
            const r = await workerBurnDown(stack, e2e.jobs, e2e.batch, e2e.inFlight);
            worker.burnDown.push(r);
            console.log(
              `  worker burn-down run ${run}: ${Math.round(r.jobsPerSec)} jobs/s (${r.seconds.toFixed(2)} s, the last ${r.tailSeconds.toFixed(2)} s after the last enqueue), ` +
                `enqueue ${Math.round(r.enqueuePerSec)} jobs/s over HTTP (batch p50 ${r.batchHttpP50Ms.toFixed(0)} ms), ` +
                `created → claim p50 ${r.createdToClaimP50Ms.toFixed(0)} ms, p99 ${r.createdToClaimP99Ms.toFixed(0)} ms, ` +
                `${r.invocations} invocations${r.minuteTickInWindow ? ' (a minute tick fell in the window)' : ''}; CPU per 1k jobs: postgres ${fmtMs(r.cpu.postgresMs)}, ` +
                `workerd ${fmtMs(r.cpu.workerdMs)}, wrangler ${fmtMs(r.cpu.wranglerMs)}, npm start ${fmtMs(r.cpu.devScriptMs)}, bench ${fmtMs(r.cpu.benchMs)} ms`,
            );
            try {
              const t = await workerTickDrain(stack, e2e.jobs);
              worker.tickDrain.push(t);
              console.log(
                `  worker tick drain run ${run}: ${Math.round(t.jobsPerSec)} jobs/s (${t.seconds.toFixed(2)} s, ${t.invocations} invocations), ` +
                  `claim → finished p50 ${t.claimToFinishedP50Ms.toFixed(1)} ms; CPU per 1k jobs: postgres ${fmtMs(t.cpu.postgresMs)}, ` +
                  `workerd ${fmtMs(t.cpu.workerdMs)}, wrangler ${fmtMs(t.cpu.wranglerMs)} ms`,
              );
            } catch (error) {
              worker.failures.push(`tick drain run ${run}: ${(error as Error).message}`);
              console.log(`  worker tick drain run ${run} FAILED: ${(error as Error).message}`);
            }
          } else {
            const r = await workerSteady(stack, e2e.rate, e2e.seconds);
            worker.steady.push(r);
            console.log(
              `  worker steady run ${run}: HTTP call → claim p50 ${r.p50Ms.toFixed(1)} ms, p99 ${r.p99Ms.toFixed(1)} ms, max ${r.maxMs.toFixed(1)} ms; ` +
                `POST p50 ${r.httpP50Ms.toFixed(1)} ms, p99 ${r.httpP99Ms.toFixed(1)} ms; call → created_at p50 ${r.toCreatedP50Ms.toFixed(1)} ms, ` +
                `created → claim p50 ${r.createdToClaimP50Ms.toFixed(1)} ms, claim → finished p50 ${r.claimToFinishedP50Ms.toFixed(1)} ms ` +
                `(${Math.round(r.offeredPerSec)}/s offered, ${r.invocations} invocations${r.minuteTickInWindow ? ', a minute tick fell in the window' : ''})`,
            );
          }
        } catch (error) {
          worker.failures.push(`${mode} run ${run}: ${(error as Error).message}`);
          console.log(`  worker ${mode} run ${run} FAILED: ${(error as Error).message}`);
        }
      }
    }
  } catch (error) {
    if (launched) console.error(launched.output().slice(-5_000));
    throw error;
  } finally {
    offInterrupt();
    await teardown();
  }

  const summary = summarizeE2e(node, worker);
  console.log(`\n${e2eTable(summary)}\n`);
  const end = machine();
  console.log(`load average at the end: ${end.loadAverage}; commit ${version}`);
  writeResults(args.out, {
    e2e: {
      at: new Date().toISOString(),
      machine: end,
      postgres: await server.describe(),
      embedded: server.embedded,
      engine: version,
      jobType: JOB_TYPE,
      args: { ...e2e, runs, modes: args.modes, nodeSettings: args.settings },
      workerVars,
      node,
      worker,
      summary,
    },
  });
  console.log(`wrote the e2e key of ${args.out}`);
}

/** Values of wrangler.toml's [vars] (the deployed defaults). */
function wranglerVars(names: string[]): Record<string, string> {
  const toml = readFileSync(`${PROJECT_ROOT}wrangler.toml`, 'utf8');
  const out: Record<string, string> = {};
  for (const name of names) {
    const m = new RegExp(`^${name}\\s*=\\s*"([^"]*)"`, 'm').exec(toml);
    if (m) out[name] = m[1]!;
  }
  return { ...out, LOG_STEPS: 'true (default)' };
}

/** Overrides `npm start` passes to the Worker (e.g. STARBASE_DEV_VARS='{"LOG_STEPS":"false"}'). */
function devVars(): Record<string, string> {
  return JSON.parse(process.env.STARBASE_DEV_VARS ?? '{}') as Record<string, string>;
}

const fmtMs = (n: number | null) => (n === null ? '?' : n.toFixed(0));
