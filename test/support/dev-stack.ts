import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { freePort } from '../../scripts/embedded-postgres.ts';
import { createTestDatabase } from './db.ts';

export interface DevStack {
  /** The Worker's URL as `npm start` printed it. */
  baseUrl: string;
  /** The dev token it printed (the admin token). */
  token: string;
  databaseUrl: string;
  child: ChildProcess;
  /** Everything the stack printed so far. */
  output(): string;
  /** The dev script's exit code once it exits. */
  exited: Promise<number | null>;
  /** A JSON request with the dev token. */
  api(path: string, init?: RequestInit): Promise<Response>;
  /** Ctrl-C, as an operator would; the stack stops everything it started. */
  stop(): Promise<number | null>;
}

/**
 * Boots the `npm start` stack (migrations, sandbox, wrangler dev, cron driver) on this file's
 * test database, with a temporary STARBASE_DATA_DIR, and stops it after the file's tests.
 */
export async function startDevStack(options: { env?: Record<string, string> } = {}): Promise<DevStack> {
  const db = await createTestDatabase();
  const dataDir = mkdtempSync(join(tmpdir(), 'starbase-e2e-'));
  const port = await freePort();
  const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/dev.ts'], {
    env: { ...process.env, ...options.env, PORT: String(port), DATABASE_URL: db.url, STARBASE_DATA_DIR: dataDir },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));

  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGINT');
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      await exited;
      clearTimeout(timer);
    }
    return exited;
  };
  afterAll(async () => {
    await stop();
    rmSync(dataDir, { recursive: true, force: true });
  }, 40_000);

  const deadline = Date.now() + 120_000;
  while (!/starbase-worker is running/.test(output)) {
    if (Date.now() > deadline || child.exitCode !== null) throw new Error(`the dev stack did not start:\n${output}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const baseUrl = /API\s+(http:\/\/\S+)/.exec(output)![1]!;
  const token = /dev token\s+(\S+)/.exec(output)![1]!;
  return {
    baseUrl,
    token,
    databaseUrl: db.url,
    child,
    output: () => output,
    exited,
    api: (path, init = {}) =>
      fetch(`${baseUrl}${path}`, { ...init, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...init.headers } }),
    stop,
  };
}
