import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startEmbeddedPostgres } from '../../scripts/embedded-postgres.ts';

/**
 * An embedded Postgres must not outlive the process that started it. A Node parent killed with
 * SIGKILL (`timeout -s KILL`, the OOM killer, a CI runner giving up) runs no exit hook, so the
 * postmaster used to stay with parent 1, holding its port and its temp data directory, one more
 * per killed test run. Here a real child process starts a real embedded Postgres and is SIGKILLed.
 */

const SCRIPT = new URL('../../scripts/embedded-postgres.ts', import.meta.url).pathname;

/** Alive and not a zombie (a zombie has exited; reaping it is its new parent's business). */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

async function until(condition: () => boolean, ms: number): Promise<boolean> {
  for (const end = Date.now() + ms; Date.now() < end; await new Promise((r) => setTimeout(r, 100))) {
    if (condition()) return true;
  }
  return condition();
}

const leftovers: { pid?: number; dir: string }[] = [];
afterEach(async () => {
  // Whatever a failing run left behind: stop it so the machine is as the test found it.
  for (const { pid, dir } of leftovers.splice(0)) {
    if (pid && alive(pid)) {
      process.kill(pid, 'SIGINT');
      await until(() => !alive(pid), 15_000);
    }
    rmSync(dir, { recursive: true, force: true });
  }
});

/** A Node process (the pinned node, through tsx, as the npm scripts run) that starts a cluster and waits. */
async function startInChild(persistent: boolean) {
  // (the data directory itself: as root the server runs as `postgres`, which cannot enter a 0700 parent)
  const dataDir = mkdtempSync(join(tmpdir(), 'starbase-embedded-test-'));
  const entry = { dir: dataDir } as { pid?: number; dir: string };
  leftovers.push(entry);
  const code = `
    const { startEmbeddedPostgres } = await import(${JSON.stringify(SCRIPT)});
    const pg = await startEmbeddedPostgres({ dataDir: ${JSON.stringify(dataDir)}, persistent: ${persistent} });
    const pid = Number((await import('node:fs')).readFileSync(${JSON.stringify(dataDir)} + '/postmaster.pid', 'utf8').split('\\n')[0]);
    console.log(JSON.stringify({ pid, port: pg.port }));
    setInterval(() => {}, 1 << 30);
  `;
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  const started = await new Promise<{ pid: number; port: number }>((resolve, reject) => {
    child.stdout!.on('data', (d) => {
      out += d;
      const line = out.split('\n').find((l) => l.startsWith('{'));
      if (line) resolve(JSON.parse(line));
    });
    child.on('exit', () => reject(new Error(`child exited before starting Postgres:\n${out}`)));
  });
  entry.pid = started.pid;
  return { child, exited, dataDir, ...started };
}

describe('embedded Postgres whose starting process is SIGKILLed', () => {
  it('stops, and its non-persistent data directory is removed', async () => {
    const { child, exited, pid, dataDir } = await startInChild(false);
    expect(alive(pid)).toBe(true);
    expect(existsSync(`${dataDir}/PG_VERSION`)).toBe(true);
    child.kill('SIGKILL');
    await exited;
    // (a bounded wait for the shutdown, not a timing claim: the assertion is that it happens)
    expect(await until(() => !alive(pid) && !existsSync(dataDir), 15_000)).toBe(true);
  });

  it('stops, and a persistent data directory is kept, shut down cleanly', async () => {
    const { child, exited, pid, dataDir } = await startInChild(true);
    child.kill('SIGKILL');
    await exited;
    expect(await until(() => !alive(pid), 15_000)).toBe(true);
    expect(existsSync(`${dataDir}/PG_VERSION`)).toBe(true);
    // A clean shutdown removes postmaster.pid (a SIGKILLed postmaster would leave it).
    expect(existsSync(`${dataDir}/postmaster.pid`)).toBe(false);
  });
});

/** Watchdog processes (scripts/lib/postmaster-watchdog.ts) watching dataDir. */
function watchdogs(dataDir: string): number[] {
  return readdirSync('/proc')
    .filter((e) => /^\d+$/.test(e))
    .filter((e) => {
      try {
        const argv = readFileSync(`/proc/${e}/cmdline`, 'utf8').split('\0');
        return argv.includes('starbase-postmaster-watchdog') && argv.includes(dataDir) && alive(Number(e));
      } catch {
        return false;
      }
    })
    .map(Number);
}

describe('embedded Postgres stopped normally', () => {
  it('releases its watchdog on stop, and a start after stop is watched again', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'starbase-embedded-test-'));
    leftovers.push({ dir: dataDir });
    const pg = await startEmbeddedPostgres({ dataDir, persistent: true });
    expect(watchdogs(dataDir)).toHaveLength(1);
    await pg.stop();
    expect(await until(() => watchdogs(dataDir).length === 0, 15_000)).toBe(true);
    expect(existsSync(`${dataDir}/PG_VERSION`)).toBe(true); // a released watchdog removes nothing
    await pg.start();
    expect(watchdogs(dataDir)).toHaveLength(1);
    await pg.stop();
    expect(await until(() => watchdogs(dataDir).length === 0, 15_000)).toBe(true);
  });
});
