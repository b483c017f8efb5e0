import { spawn, type ChildProcess } from 'node:child_process';
import { freePort } from '../embedded-postgres.ts';
import { PROJECT_ROOT } from './cli.ts';

export interface LaunchedDevStack {
  /** The Worker's URL as `npm start` printed it. */
  baseUrl: string;
  /** The dev token it printed (the admin token). */
  token: string;
  /** STARBASE_DATA_DIR of the stack (its secrets, the stack file, wrangler's local storage). */
  dataDir: string;
  /** The `npm start` process (scripts/dev.ts); wrangler dev and workerd run in its own process group below it. */
  child: ChildProcess;
  /** What the stack printed: everything, or with `outputLimit` the start-up banner and the latest output. */
  output(): string;
  /** The dev script's exit code once it exits. */
  exited: Promise<number | null>;
  /** A JSON request with the dev token. */
  api(path: string, init?: RequestInit): Promise<Response>;
  /** Ctrl-C, as an operator would: the stack stops everything it started (SIGKILL after 30 s). */
  stop(): Promise<number | null>;
}

export interface LaunchOptions {
  /** The database (migrated by the stack); without one, `npm start` runs its embedded Postgres in dataDir. */
  databaseUrl?: string;
  /** STARBASE_DATA_DIR: wrangler's local storage and the dev secrets (a temporary folder for tests and benchmarks). */
  dataDir: string;
  port?: number;
  env?: Record<string, string>;
  bootTimeoutMs?: number;
  /** Keep at most this many characters of the latest output beyond the start-up banner (all when absent). */
  outputLimit?: number;
}

/**
 * Boots the `npm start` stack (scripts/dev.ts: migrations, sandbox providers, `wrangler dev`, the
 * cron driver) as a child process and waits until it prints that it is running. Shared by the
 * e2e tests and the end-to-end benchmark, so both drive the Worker exactly as `npm start` runs it.
 */
export async function launchDevStack(options: LaunchOptions): Promise<LaunchedDevStack> {
  const port = options.port ?? (await freePort());
  // Without options.databaseUrl the stack runs its embedded Postgres, whatever this shell's
  // DATABASE_URL says (the soak reads the whole database afterwards: it must be its own).
  const { DATABASE_URL: _inherited, ...inherited } = process.env;
  const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/dev.ts'], {
    cwd: PROJECT_ROOT,
    env: {
      ...inherited,
      WRANGLER_SEND_METRICS: 'false',
      ...options.env,
      PORT: String(port),
      STARBASE_DATA_DIR: options.dataDir,
      ...(options.databaseUrl ? { DATABASE_URL: options.databaseUrl } : {}),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let banner = '';
  let latest = '';
  let booted = false;
  const keep = (chunk: Buffer) => {
    if (!booted) {
      banner += chunk;
      // the banner's last line: URL and token are above it
      booted = /starbase-worker is running[\s\S]*Ctrl-C stops everything/.test(banner);
    } else if (options.outputLimit === undefined) {
      banner += chunk;
    } else {
      latest += chunk;
    }
    if (options.outputLimit !== undefined && latest.length > 2 * options.outputLimit) latest = latest.slice(-options.outputLimit);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const output = () => (options.outputLimit === undefined ? banner : banner + latest.slice(-options.outputLimit));

  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGINT');
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      await exited;
      clearTimeout(timer);
    }
    return exited;
  };

  const deadline = Date.now() + (options.bootTimeoutMs ?? 120_000);
  while (!booted) {
    if (Date.now() > deadline || child.exitCode !== null) {
      await stop();
      throw new Error(`the dev stack did not start:\n${output()}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const baseUrl = /API\s+(http:\/\/\S+)/.exec(banner)![1]!;
  const token = /dev token\s+(\S+)/.exec(banner)![1]!;
  return {
    baseUrl,
    token,
    dataDir: options.dataDir,
    child,
    output,
    exited,
    api: (path, init = {}) =>
      fetch(`${baseUrl}${path}`, { ...init, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...init.headers } }),
    stop,
  };
}
