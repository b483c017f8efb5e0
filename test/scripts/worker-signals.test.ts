import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { enqueue, getJob, JobRegistry } from '../../queue/index.ts';
import { slow } from '../fixtures/slow-job-types.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';

/**
 * `npm run worker` as a real process tree (npm → node), stopped the ways a supervisor stops it:
 * SIGTERM to npm (systemd's KillMode=mixed, an init forwarding `docker stop`), SIGTERM to the
 * whole process group (KillMode=control-group, a terminal's ^C), and npm vanishing without a
 * signal (SIGKILL; what npm 11 did on SIGTERM when a shell and tsx stood between it and the
 * runner, leaving the runner claiming with parent 1). Each time: the step in flight finishes,
 * no process of the group is left alive, and no lease is held.
 */

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
  await new JobRegistry([slow]).sync(db.sql);
});

const TYPES = ['--types', 'test/fixtures/slow-job-types.ts'];

interface Tree {
  child: ChildProcess;
  /** The process group: the npm process leads it. */
  pgid: number;
  output: () => string;
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Start argv in its own process group, as a supervisor starts its main process. */
function start(argv: string[]): Tree {
  const child = spawn(argv[0]!, argv.slice(1), {
    env: { ...process.env, DATABASE_URL: db.url },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true, // setsid: the tree gets its own group, led by the started process
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    // 'close', not 'exit': at exit the last output can still be in the pipe
    child.on('close', (code, signal) => resolve({ code, signal })),
  );
  return { child, pgid: child.pid!, output: () => out, exit };
}

const npmWorker = (args: string[] = []) => start(['npm', 'run', '-s', 'worker', '--', ...TYPES, ...args]);

/** Live processes of a group: /proc/<pid>/stat's pgrp field, zombies left out (they have exited; reaping them is PID 1's business). */
function liveInGroup(pgid: number): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // exited meanwhile
    }
    // pid (comm) state ppid pgrp …; comm may contain spaces and parentheses
    const [state, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(pgrp) === pgid && state !== 'Z') pids.push(Number(entry));
  }
  return pids;
}

async function until<T>(check: () => Promise<T | false> | T | false, what: string, timeoutMs = 30_000): Promise<T> {
  const start = Date.now();
  for (;;) {
    const value = await check();
    if (value !== false) return value;
    if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Enqueue a slow job and wait until the worker runs it; returns the job and the worker's id (its locked_by). */
async function runningSlowJob(ms = 1500) {
  const { job } = await enqueue(db.sql, { type: 'slow', payload: { ms } });
  const workerId = await until(async () => {
    const j = (await getJob(db.sql, job.id))!.job;
    return j.status === 'running' ? j.lockedBy! : false;
  }, 'the slow job to start');
  return { job, workerId };
}

/** After a stop: the group has no live process, the job finished, no lease of this worker is held. */
async function expectCleanStop(tree: Tree, jobId: string, workerId: string) {
  await until(() => liveInGroup(tree.pgid).length === 0 || false, 'every process of the group to exit');
  expect((await getJob(db.sql, jobId))!.job).toMatchObject({ status: 'done', result: { sleptMs: expect.any(Number) } });
  const held = await db.sql`select id from worker.jobs where status = 'running' and locked_by = ${workerId}`;
  expect(held).toEqual([]);
}

/** Kill whatever a failed test left running (what systemd does after TimeoutStopSec). */
function killGroup(tree: Tree) {
  try {
    process.kill(-tree.pgid, 'SIGKILL');
  } catch {
    // already gone
  }
}

describe('npm run worker under a supervisor', () => {
  it('SIGTERM to the npm process: the step finishes, npm exits 0, nothing is left running', async () => {
    const tree = npmWorker(['--grace-ms', '20000']);
    try {
      const { job, workerId } = await runningSlowJob();
      const runnerPid = Number(workerId.split(':').at(-1));
      const runnerParent = Number(readFileSync(`/proc/${runnerPid}/stat`, 'utf8').split(') ')[1]!.split(' ')[1]);
      process.kill(tree.pgid, 'SIGTERM');
      expect(await tree.exit).toEqual({ code: 0, signal: null });
      await expectCleanStop(tree, job.id, workerId);
      // the tree was npm and the runner itself: no shell or tsx process between them to swallow the signal
      expect(runnerParent).toBe(tree.pgid);
      expect(tree.output()).toContain('SIGTERM: finishing in-flight steps');
      expect(tree.output()).toContain('"msg":"worker stopped"');
    } finally {
      killGroup(tree);
    }
  });

  it('SIGTERM to the whole process group: the same graceful stop, npm exits 0', async () => {
    const tree = npmWorker(['--grace-ms', '20000']);
    try {
      const { job, workerId } = await runningSlowJob();
      // the runner gets SIGTERM twice (from the group, and forwarded by npm): still one graceful stop
      process.kill(-tree.pgid, 'SIGTERM');
      expect(await tree.exit).toEqual({ code: 0, signal: null });
      await expectCleanStop(tree, job.id, workerId);
      expect(tree.output()).toContain('SIGTERM: finishing in-flight steps');
    } finally {
      killGroup(tree);
    }
  });

  it('npm gone without a signal (SIGKILL): the runner notices its new parent and stops gracefully', async () => {
    const tree = npmWorker(['--grace-ms', '20000']);
    try {
      const { job, workerId } = await runningSlowJob();
      process.kill(tree.pgid, 'SIGKILL');
      expect(await tree.exit).toEqual({ code: null, signal: 'SIGKILL' });
      await expectCleanStop(tree, job.id, workerId);
      expect(tree.output()).toContain('parent exited: finishing in-flight steps');
    } finally {
      killGroup(tree);
    }
  });
});

/** The README's fenced block of a language that contains `marker`. */
function readmeBlock(lang: string, marker: string): string {
  const readme = readFileSync(new URL('../../docs/engine.md', import.meta.url), 'utf8');
  const blocks = [...readme.matchAll(new RegExp('```' + lang + '\\n([\\s\\S]*?)```', 'g'))].map((m) => m[1]!);
  const block = blocks.find((b) => b.includes(marker));
  if (!block) throw new Error(`README.md has no \`\`\`${lang} block with ${marker}`);
  return block;
}

const graceMsOf = (argv: string[]) => Number(argv[argv.indexOf('--grace-ms') + 1]);

describe("the README's supervisor setups", () => {
  it('systemd: ExecStart as written, stopped as KillMode=mixed stops it, TimeoutStopSec longer than the grace', async () => {
    const unit = readmeBlock('ini', 'ExecStart=');
    const setting = (name: string) => unit.match(new RegExp(`^${name}=(.*)$`, 'm'))?.[1]?.trim();
    const argv = setting('ExecStart')!.split(/\s+/);
    expect(setting('KillMode')).toBe('mixed');
    const timeoutMs = Number(setting('TimeoutStopSec')) * 1000;
    expect(graceMsOf(argv)).toBeGreaterThan(0);
    // the grace, then the settle and the exit: TimeoutStopSec must leave room for both
    expect(timeoutMs).toBeGreaterThanOrEqual(graceMsOf(argv) + 5_000);
    // /usr/bin/npm is where Debian's and NodeSource's packages put it; elsewhere the PATH's npm
    const tree = start([existsSync(argv[0]!) ? argv[0]! : 'npm', ...argv.slice(1), ...TYPES]);
    try {
      const { job, workerId } = await runningSlowJob();
      process.kill(tree.pgid, 'SIGTERM'); // KillMode=mixed: SIGTERM to the main process only
      expect(await tree.exit).toEqual({ code: 0, signal: null });
      await expectCleanStop(tree, job.id, workerId); // nothing left for the SIGKILL after TimeoutStopSec
    } finally {
      killGroup(tree);
    }
  });

  it('container: the exec-form CMD as written, behind an init that forwards SIGTERM to it; --init and a stop timeout longer than the grace', async () => {
    const argv = JSON.parse(readmeBlock('dockerfile', 'CMD').match(/^CMD (\[.*\])$/m)![1]!) as string[];
    const run = readmeBlock('sh', 'docker run').trim().split(/\s+/);
    expect(run).toContain('--init');
    expect(Number(run[run.indexOf('--stop-timeout') + 1]) * 1000).toBeGreaterThanOrEqual(graceMsOf(argv) + 5_000);
    // tini (--init) is PID 1 and forwards the SIGTERM of `docker stop` to its one child: this CMD
    const tree = start([...argv, ...TYPES]);
    try {
      const { job, workerId } = await runningSlowJob();
      process.kill(tree.pgid, 'SIGTERM');
      expect(await tree.exit).toEqual({ code: 0, signal: null });
      await expectCleanStop(tree, job.id, workerId);
    } finally {
      killGroup(tree);
    }
  });
});
