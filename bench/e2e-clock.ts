import { setTimeout as sleep } from 'node:timers/promises';
import postgres from 'postgres';
import type { BenchArgs } from './args.ts';
import { checkOutBase, type BaseTree } from './base-tree.ts';
import { idleCost } from './clock-idle.ts';
import { multiStepJob } from './clock-multistep.ts';
import { pushedBuilds } from './clock-push.ts';
import { clockRows, clockTable, type TreeFigures } from './clock-report.ts';
import { sqlInsertLatency } from './clock-sql-insert.ts';
import { currentTree, launchClockStack, type ClockStack } from './clock-stack.ts';
import { randomOffsets } from './clock-wait.ts';
import { workerBurnDown } from './e2e-burn-down.ts';
import { onInterrupt } from './interrupt.ts';
import { warmUp } from './e2e-stack.ts';
import { machine, writeResults } from './report.ts';
import type { BenchServer } from './server.ts';
import { engineVersion } from './versions.ts';

/**
 * `npm run bench -- --e2e-clock [--base REF]`: how the Worker keeps time on the `npm start` stack
 * (wrangler.toml's budgets, no overrides), for this tree and, with --base, a base commit checked
 * out into a temporary folder, each with its own stack and database. Both stacks run at once:
 * the latency figures mostly wait, so they are measured side by side on the same minute phases
 * (the cron driver of each ticks at :00); the idle window counts each stack's own processes and
 * database; the burn-downs take turns, base and current alternating, while the other stack idles.
 */
export async function runE2eClock(server: BenchServer, args: BenchArgs): Promise<void> {
  const { clock, e2e } = args;
  const version = engineVersion();
  let base: BaseTree | null = null;
  const stacks: ClockStack[] = [];
  const admin = postgres(server.adminUrl, { max: 2, onnotice: () => {} });
  // a stack still booting when Ctrl-C comes is stopped once it is up (its start is not interruptible)
  let booting: Promise<ClockStack> | null = null;
  let closing: Promise<void> | null = null;
  // once: Ctrl-C and the run's own unwinding both wait for the same teardown
  const teardown = () => (closing ??= stopEverything());
  const stopEverything = async () => {
    const late = await booting?.catch(() => null);
    if (late && !stacks.includes(late)) stacks.push(late);
    const stopped = await Promise.allSettled(stacks.map((s) => s.stop()));
    for (const r of stopped) if (r.status === 'rejected') console.log(`  stopping a stack: ${(r.reason as Error).message}`);
    base?.remove();
    await admin.end({ timeout: 5 }).catch(() => {});
  };
  const offInterrupt = onInterrupt('stopping the stacks and removing the base checkout', [teardown, () => server.close()]);
  const figures: TreeFigures[] = [];
  try {
    if (clock.base) {
      base = checkOutBase(clock.base);
      console.log(`base ${clock.base} = ${base.commit.slice(0, 7)}, checked out in ${base.root} (node_modules: ${base.nodeModules})`);
    }
    const trees = [currentTree(version), ...(base ? [{ label: 'base' as const, root: base.root, commit: base.commit.slice(0, 7) }] : [])];
    const bootStart = performance.now();
    // One after the other: wrangler dev takes the first free inspector port from 9229 at start-up,
    // and two starting at once take the same one (the second fails "Address already in use").
    for (const tree of trees) {
      if (closing) throw new Error('interrupted while the stacks started');
      booting = launchClockStack(server, tree);
      stacks.push(await booting);
      booting = null;
    }
    console.log(`stacks up in ${((performance.now() - bootStart) / 1000).toFixed(1)} s: ${stacks.map((s) => `${s.label} ${s.commit} at ${s.baseUrl}`).join(', ')}`);
    for (const s of stacks) figures.push({ label: s.label, commit: s.commit, burnDown: [], failures: [] });
    await Promise.all(stacks.map(warmUp));
    await measureAll(admin, stacks, figures, args);
  } finally {
    offInterrupt();
    await teardown();
  }
  const [current, baseFigures] = [figures.find((f) => f.label === 'current')!, figures.find((f) => f.label === 'base') ?? null];
  const rows = clockRows(current, baseFigures);
  console.log(`\n${clockTable(rows, { current: current.commit, base: baseFigures?.commit ?? null })}\n`);
  for (const f of figures) for (const failure of f.failures) console.log(`  ${f.label} FAILED ${failure}`);
  const end = machine();
  console.log(`load average at the end: ${end.loadAverage}`);
  writeResults(args.out, {
    e2eClock: {
      at: new Date().toISOString(),
      machine: end,
      postgres: await server.describe(),
      embedded: server.embedded,
      base: base ? { ref: base.ref, commit: base.commit, nodeModules: base.nodeModules } : null,
      args: { ...clock, runs: args.runs, burnDown: { jobs: e2e.jobs, batch: e2e.batch, inFlight: e2e.inFlight } },
      figures,
      rows,
    },
  });
  console.log(`wrote the e2eClock key of ${args.out}`);
}

/** One figure on every stack at once; a failure is recorded for that stack and the run goes on. */
async function onEach<T>(
  stacks: ClockStack[],
  figures: TreeFigures[],
  name: string,
  measure: (s: ClockStack) => Promise<T>,
  keep: (f: TreeFigures, r: T) => void,
): Promise<void> {
  const results = await Promise.allSettled(stacks.map(measure));
  results.forEach((r, i) => {
    const f = figures[i]!;
    if (r.status === 'fulfilled') keep(f, r.value);
    else {
      f.failures.push(`${name}: ${(r.reason as Error).message}`);
      console.log(`  ${f.label.padEnd(7)} ${name} FAILED: ${(r.reason as Error).message}`);
    }
  });
}

async function measureAll(admin: postgres.Sql, stacks: ClockStack[], figures: TreeFigures[], args: BenchArgs): Promise<void> {
  const { clock, e2e } = args;
  const say = (s: ClockStack, text: string) => console.log(`  ${s.label.padEnd(7)} ${text}`);

  console.log(`idle: ${clock.idleSeconds} s with nothing queued`);
  // one window for all stacks (so they idle at once); if it fails, the other figures still run
  const idle = await idleCost(admin, stacks, clock.idleSeconds).catch((error: Error) => {
    for (const f of figures) f.failures.push(`idle: ${error.message}`);
    return [];
  });
  idle.forEach((r, i) => {
    figures[i]!.idle = r;
    say(stacks[i]!, `per idle hour: ${Math.round(r.transactionsPerHour)} transactions, ${Math.round(r.sessionsPerHour)} sessions, ` +
      `workerd ${Math.round(r.workerdCpuMsPerHour)} ms + wrangler ${Math.round(r.wranglerCpuMsPerHour)} ms CPU, ` +
      `alarms ${r.alarmsPerHour === null ? 'n/a (no dispatchers)' : Math.round(r.alarmsPerHour)}`);
  });

  // a random phase of the minute, the same for every stack
  const phase = Math.random() * 60_000;
  const wait = (phase - (Date.now() % 60_000) + 60_000) % 60_000;
  console.log(`multi-step: countdown of ${clock.steps} steps ${clock.stepDelayMs / 1000} s apart, inserted with SQL at :${(phase / 1000).toFixed(1)} (in ${(wait / 1000).toFixed(0)} s)`);
  await sleep(wait);
  await onEach(stacks, figures, 'multi-step', (s) => multiStepJob(s, clock.steps, clock.stepDelayMs), (f, r) => {
    f.multiStep = r;
    say(stacks[figures.indexOf(f)]!, `${r.totalSeconds.toFixed(1)} s created → finished (${r.ratioToDelays.toFixed(2)}× its delays), ` +
      `${r.claims} claims, longest gap ${r.longestGapSeconds.toFixed(1)} s, first claim after ${r.firstClaimSeconds.toFixed(1)} s`);
  });

  const inserts = randomOffsets(clock.inserts, clock.insertWindowSeconds * 1000);
  console.log(`SQL inserts: ${clock.inserts} uppercase jobs at random moments of ${clock.insertWindowSeconds} s`);
  await onEach(stacks, figures, 'SQL insert', (s) => sqlInsertLatency(s, inserts), (f, r) => {
    f.sqlInsert = r;
    say(stacks[figures.indexOf(f)]!, `insert → start worst ${r.worstSeconds.toFixed(2)} s, median ${r.medianSeconds.toFixed(2)} s ` +
      `(${r.waitsSeconds.map((w, i) => `${w.toFixed(1)} s at :${r.phases[i]!.toFixed(0)}`).join(', ')})`);
  });

  const pushes = randomOffsets(clock.pushes, clock.pushWindowSeconds * 1000);
  console.log(`pushes: ${clock.pushes} POST /v1/pushes at random moments of ${clock.pushWindowSeconds} s`);
  await onEach(stacks, figures, 'push', (s) => pushedBuilds(s, pushes), (f, r) => {
    f.push = r;
    say(stacks[figures.indexOf(f)]!, `first step − runAt p50 ${r.p50Seconds.toFixed(2)} s, p99 ${r.p99Seconds.toFixed(2)} s ` +
      `(${r.lateSeconds.map((l) => l.toFixed(1)).join(', ')}; ${Object.entries(r.statuses).map(([k, n]) => `${n} ${k}`).join(', ')})`);
  });

  console.log(`burn-down: ${e2e.jobs} uppercase jobs over HTTP in batches of ${e2e.batch}, ${args.runs} runs per tree, the trees alternating`);
  for (let run = 1; run <= args.runs; run++) {
    const order = run % 2 === 1 ? stacks : [...stacks].reverse();
    for (const s of order) {
      const f = figures[stacks.indexOf(s)]!;
      try {
        const r = await workerBurnDown(s, e2e.jobs, e2e.batch, e2e.inFlight);
        f.burnDown.push(r);
        say(s, `burn-down run ${run}: ${Math.round(r.jobsPerSec)} jobs/s (${r.seconds.toFixed(2)} s${r.minuteTickInWindow ? ', a minute tick in the window' : ''}), ` +
          `workerd + wrangler ${Math.round(r.cpu.workerdMs + r.cpu.wranglerMs)} ms CPU per 1k jobs`);
      } catch (error) {
        f.failures.push(`burn-down run ${run}: ${(error as Error).message}`);
      }
    }
  }
}
