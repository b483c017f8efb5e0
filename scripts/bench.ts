import { BenchUsageError, parseBenchArgs } from '../bench/args.ts';
import { usageError } from './lib/cli.ts';
import { runCli } from '../bench/cli.ts';
import { runE2e } from '../bench/e2e.ts';
import { runE2eClock } from '../bench/e2e-clock.ts';
import { burnDown, steady } from '../bench/modes.ts';
import { describeEnvironment, machine, summarize, table, writeResults, type SystemCell } from '../bench/report.ts';
import { runScaleCheck } from '../bench/scale.ts';
import { runSustained } from '../bench/sustained.ts';
import { openServer } from '../bench/server.ts';
import { engineSystem } from '../bench/systems/engine.ts';
import { floorSystem } from '../bench/systems/floor.ts';
import { graphileSystem } from '../bench/systems/graphile.ts';
import { pgBossSystem } from '../bench/systems/pgboss.ts';
import type { BenchSystem } from '../bench/systems/types.ts';
import { engineVersion, packageVersion } from '../bench/versions.ts';

// `npm run bench`: this engine vs. graphile-worker vs. pg-boss vs. a raw SKIP LOCKED floor, on one
// Postgres with the same connections and concurrency. Never part of `npm test`. `--sustained`: a
// steady batched load with each system's retention running (bench/sustained.ts); `--scale`: claim
// cost on a loaded table; `--e2e`: through the Worker under wrangler dev (bench/e2e.ts); `--e2e-clock`
// (with `--base REF`): the Worker's clock, this tree against a base commit (bench/e2e-clock.ts).
const args = (() => {
  try {
    return parseBenchArgs(process.argv.slice(2));
  } catch (error) {
    if (error instanceof BenchUsageError) usageError('npm run bench', error.message);
    throw error;
  }
})();

/** The systems `--only` names (all four without it). */
function selectedSystems(): BenchSystem[] {
  const all: BenchSystem[] = [
    engineSystem(engineVersion()),
    graphileSystem(packageVersion('graphile-worker')),
    pgBossSystem(packageVersion('pg-boss')),
    floorSystem(),
  ];
  const systems = args.only ? all.filter((s) => args.only!.includes(s.name)) : all;
  if (systems.length === 0) throw new Error(`--only matched no system (have: ${all.map((s) => s.name).join(', ')})`);
  return systems;
}

const server = await openServer();
try {
  const env = describeEnvironment(machine(), await server.describe(), server.embedded);
  console.log(env);
  if (args.scale) {
    await runScaleCheck(server, args);
  } else if (args.cli.enabled) {
    await runCli(server, args);
  } else if (args.clock.enabled) {
    await runE2eClock(server, args);
  } else if (args.e2e.enabled) {
    await runE2e(server, args);
  } else if (args.sustained.enabled) {
    await runSustained(server, args, selectedSystems());
  } else {
    const systems = selectedSystems();
    const { settings } = args;
    console.log(
      `settings: ${settings.connections} connections, ${settings.concurrency} jobs in flight, batch ${settings.batch}, ` +
        `idle poll ${settings.idlePollMs} ms; burn-down ${args.jobs} jobs; steady ${args.rate}/s for ${args.seconds} s; ` +
        `${args.runs} runs per cell, fresh database per run`,
    );
    const cells: SystemCell[] = systems.map((s) => ({ name: s.name, version: s.version, config: s.describe(settings), burnDown: [], steady: [], failures: [] }));
    for (const s of systems) console.log(`  ${s.name} ${s.version}: ${s.describe(settings)}`);
    // Runs interleave across systems so drift on a shared machine spreads over all of them.
    for (const mode of args.modes) {
      for (let run = 1; run <= args.runs; run++) {
        for (const [i, system] of systems.entries()) {
          const cell = cells[i]!;
          try {
            if (mode === 'burn-down') {
              const r = await burnDown(server, system, settings, args.jobs);
              cell.burnDown.push(r);
              console.log(
                `  burn-down ${system.name} run ${run}: ${Math.round(r.jobsPerSec)} jobs/s (${r.seconds.toFixed(2)} s), ` +
                  `CPU per 1k jobs: postgres ${r.cpu.postgresMs?.toFixed(0) ?? '?'} ms, node ${r.cpu.nodeMs.toFixed(0)} ms` +
                  `${r.extraRuns ? `, ${r.extraRuns} extra runs` : ''}`,
              );
            } else {
              const r = await steady(server, system, settings, { rate: args.rate, seconds: args.seconds });
              cell.steady.push(r);
              console.log(
                `  steady ${system.name} run ${run}: p50 ${r.p50Ms.toFixed(1)} ms, p99 ${r.p99Ms.toFixed(1)} ms, ` +
                  `max ${r.maxMs.toFixed(1)} ms (${Math.round(r.offeredPerSec)}/s offered)`,
              );
            }
          } catch (error) {
            cell.failures.push(`${mode} run ${run}: ${(error as Error).message}`);
            console.log(`  ${mode} ${system.name} run ${run} FAILED: ${(error as Error).message}`);
          }
        }
      }
    }
    const summaries = cells.map(summarize);
    console.log(`\n${table(summaries)}\n`);
    console.log(`load average at the end: ${machine().loadAverage}`);
    writeResults(args.out, {
      bench: { at: new Date().toISOString(), machine: machine(), postgres: await server.describe(), embedded: server.embedded, args, cells, summaries },
    });
    console.log(`wrote ${args.out}`);
  }
} finally {
  await server.close();
}
