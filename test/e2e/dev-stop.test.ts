import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../scripts/embedded-postgres.ts';
import { PROJECT_ROOT } from '../../scripts/lib/cli.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';

/**
 * `npm start` as an operator runs it: npm, its shell, tsx and the dev script in one process group
 * (a terminal's foreground job), wrangler and workerd in a group of their own. However the stack
 * stops, the files holding its secrets for the running stack (.data/dev.vars, dev-stack.json) go
 * with it, and no process is left behind.
 */
let db: TestDatabase;
const dataDirs: string[] = [];
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(() => {
  for (const dir of dataDirs) {
    for (const pid of processesOf(dir)) kill(pid, 'SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
});

/** The processes started for the stack in `dataDir`: each has STARBASE_DATA_DIR=dataDir in its environment. */
function processesOf(dataDir: string): number[] {
  const mark = `STARBASE_DATA_DIR=${dataDir}\0`;
  return readdirSync('/proc').filter((name) => /^\d+$/.test(name)).map(Number).filter((pid) => {
    try {
      return `${readFileSync(`/proc/${pid}/environ`, 'utf8')}\0`.includes(mark);
    } catch {
      return false; // gone meanwhile, or not ours
    }
  });
}

function kill(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // already gone
  }
}

async function until(what: string, check: () => boolean, timeoutMs = 60_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

interface Started {
  npm: ChildProcess;
  dataDir: string;
  /** The dev script's pid, from the stack file. */
  devPid: number;
  output(): string;
  /** True once npm has exited and its output streams have ended: all it printed is in output(). */
  closed(): boolean;
}

/** `npm start` in a process group of its own, on this file's database, booted. */
async function npmStart(): Promise<Started> {
  const dataDir = mkdtempSync(join(tmpdir(), 'starbase-stop-'));
  dataDirs.push(dataDir);
  const { DATABASE_URL: _inherited, ...env } = process.env;
  const npm = spawn('npm', ['start'], {
    cwd: PROJECT_ROOT,
    detached: true,
    env: { ...env, WRANGLER_SEND_METRICS: 'false', PORT: String(await freePort()), STARBASE_DATA_DIR: dataDir, DATABASE_URL: db.url },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let closed = false;
  npm.stdout!.on('data', (d) => (out += d));
  npm.stderr!.on('data', (d) => (out += d));
  npm.on('close', () => (closed = true));
  await until('the stack to boot', () => /Ctrl-C stops everything/.test(out) || npm.exitCode !== null, 120_000);
  expect(out).toContain('Ctrl-C stops everything');
  const devPid = (JSON.parse(readFileSync(join(dataDir, 'dev-stack.json'), 'utf8')) as { pid: number }).pid;
  expect(existsSync(join(dataDir, 'dev.vars'))).toBe(true);
  return { npm, dataDir, devPid, output: () => out, closed: () => closed };
}

/** A second `npm start` on the same data folder: it exits 1 at once. */
async function npmStartAgain(first: Started): Promise<string> {
  const { DATABASE_URL: _inherited, ...env } = process.env;
  const again = spawn('npm', ['start'], {
    cwd: PROJECT_ROOT,
    env: { ...env, WRANGLER_SEND_METRICS: 'false', PORT: String(await freePort()), STARBASE_DATA_DIR: first.dataDir, DATABASE_URL: db.url },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  again.stdout!.on('data', (d) => (out += d));
  again.stderr!.on('data', (d) => (out += d));
  const code = await new Promise<number | null>((resolve) => again.on('close', resolve));
  expect(code, out).toBe(1);
  return out;
}

/** Waits until every process of the stack is gone, then checks that its secret files went with it. */
async function expectStoppedClean(stack: Started): Promise<void> {
  await until('every process of the stack to exit', () => processesOf(stack.dataDir).length === 0);
  // the processes can be gone before their last lines reach this process
  await until("npm's output to end", () => stack.closed());
  expect(stack.output()).toContain('stopping');
  expect(existsSync(join(stack.dataDir, 'dev.vars')), 'dev.vars').toBe(false);
  expect(existsSync(join(stack.dataDir, 'dev-stack.json')), 'dev-stack.json').toBe(false);
}

describe('npm start removes its vars file however it stops', () => {
  it('one Ctrl-C (SIGINT to the process group); a second npm start meanwhile says where the first runs', async () => {
    const stack = await npmStart();
    const refusal = await npmStartAgain(stack);
    expect(refusal).toContain('a stack is already running');
    expect(refusal).toContain(`pid ${stack.devPid}`);
    expect(refusal).toContain(stack.dataDir);
    expect(refusal).toMatch(/API http:\/\/127\.0\.0\.1:\d+/);
    expect(refusal).not.toContain('undefined');
    // the refusal touched nothing of the running stack
    expect(existsSync(join(stack.dataDir, 'dev.vars'))).toBe(true);
    expect(existsSync(join(stack.dataDir, 'dev-stack.json'))).toBe(true);
    process.kill(-stack.npm.pid!, 'SIGINT');
    await expectStoppedClean(stack);
  }, 180_000);

  it('two Ctrl-C, the second while it stops', async () => {
    const stack = await npmStart();
    process.kill(-stack.npm.pid!, 'SIGINT');
    await until('the stack to start stopping', () => stack.output().includes('stopping'));
    kill(-stack.npm.pid!, 'SIGINT'); // (unless everything in npm's group has exited already)
    await expectStoppedClean(stack);
  }, 180_000);

  it('SIGTERM to npm alone', async () => {
    const stack = await npmStart();
    stack.npm.kill('SIGTERM');
    await expectStoppedClean(stack);
  }, 180_000);

  it('SIGTERM to the process group', async () => {
    const stack = await npmStart();
    process.kill(-stack.npm.pid!, 'SIGTERM');
    await expectStoppedClean(stack);
  }, 180_000);

  it('wrangler dev crashing', async () => {
    const stack = await npmStart();
    // wrangler's group: the dev script's child that runs wrangler.js, the leader of its own group
    const wrangler = processesOf(stack.dataDir).find((pid) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('wrangler.js\0dev'));
    expect(wrangler).toBeDefined();
    process.kill(-wrangler!, 'SIGKILL');
    await expectStoppedClean(stack);
    expect(stack.output()).toContain('wrangler dev exited');
  }, 180_000);
});
