import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import postgres from 'postgres';
import { startEmbeddedPostgres } from '../scripts/embedded-postgres.ts';
import { postmasterPid } from './cpu.ts';

/** The one Postgres server every system runs against, and a fresh database per run. */
export interface BenchServer {
  adminUrl: string;
  embedded: boolean;
  /** The server's postmaster when it runs on this host (for CPU accounting), else null. */
  postmaster: number | null;
  /** A new empty database; dropped by the returned `drop`. */
  freshDatabase(label: string): Promise<{ url: string; drop(): Promise<void> }>;
  describe(): Promise<ServerDescription>;
  close(): Promise<void>;
}

export interface ServerDescription {
  version: string;
  settings: Record<string, string>;
}

/** The settings that move queue throughput; printed with every result. */
const REPORTED_SETTINGS = [
  'max_connections', 'shared_buffers', 'work_mem', 'fsync', 'synchronous_commit', 'wal_level', 'full_page_writes',
  'max_wal_size', 'checkpoint_timeout', 'autovacuum', 'autovacuum_naptime', 'autovacuum_vacuum_scale_factor',
  'autovacuum_vacuum_insert_scale_factor', 'jit', 'random_page_cost', 'effective_cache_size',
];

/**
 * DATABASE_URL when set (an admin connection that may create databases); otherwise an embedded
 * Postgres in a temp folder with its stock settings (durable: fsync and synchronous_commit on),
 * removed on close.
 */
export async function openServer(): Promise<BenchServer> {
  let adminUrl = process.env.DATABASE_URL;
  let stop = async () => {};
  const embedded = !adminUrl;
  if (!adminUrl) {
    const dataDir = mkdtempSync(join(tmpdir(), 'starbase-bench-pg-'));
    const pg = await startEmbeddedPostgres({ dataDir, persistent: true });
    adminUrl = pg.url;
    stop = async () => {
      try {
        // After Ctrl-C the server has often stopped already (it is in the terminal's process
        // group), and embedded-postgres' stop() then waits for an exit that has happened.
        await Promise.race([pg.stop(), exited(dataDir)]);
      } finally {
        rmSync(dataDir, { recursive: true, force: true });
      }
    };
  }
  return openServerAt(adminUrl, { embedded, stop });
}

/** The bench's server at `adminUrl` (a role that may create databases); `stop` runs after close. */
export async function openServerAt(adminUrl: string, options: { embedded?: boolean; stop?: () => Promise<void> } = {}): Promise<BenchServer> {
  const { embedded = false, stop = async () => {} } = options;
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  const postmaster = await postmasterPid(admin);
  let counter = 0;
  let closing: Promise<void> | undefined;
  return {
    adminUrl,
    embedded,
    postmaster,
    async freshDatabase(label) {
      const name = `bench_${process.pid}_${label.replace(/[^a-z0-9]/gi, '_').toLowerCase()}_${++counter}`;
      await admin.unsafe(`drop database if exists ${name} with (force)`);
      await admin.unsafe(`create database ${name} template template0`);
      const url = new URL(adminUrl);
      url.pathname = `/${name}`;
      return {
        url: url.toString(),
        drop: async () => {
          await admin.unsafe(`drop database if exists ${name} with (force)`);
        },
      };
    },
    async describe() {
      const [v] = await admin`select version() as v`;
      const rows = await admin`select name, setting, unit from pg_settings where name = any(${REPORTED_SETTINGS})`;
      const settings: Record<string, string> = {};
      for (const r of rows) settings[r.name as string] = `${r.setting as string}${r.unit ? ` ${r.unit as string}` : ''}`;
      return { version: String(v!.v), settings };
    },
    // once, whoever asks first (the run's end, or Ctrl-C while the run unwinds)
    close() {
      closing ??= admin.end({ timeout: 5 }).catch(() => {}).then(stop);
      return closing;
    },
  };
}

/** Resolves once the postmaster of `dataDir` has gone (postmaster.pid removed, or its process gone). */
async function exited(dataDir: string): Promise<void> {
  for (;;) {
    let pid: number | null = null;
    try {
      pid = Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
    } catch {
      return;
    }
    try {
      if (readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.startsWith('Z')) return;
    } catch {
      return;
    }
    await sleep(100);
  }
}

/**
 * Statistics fresh, dead rows vacuumed and the WAL checkpointed, so every timed part starts from
 * the same state (not paying for the untimed load before it).
 */
export async function settleDatabase(sql: { unsafe(query: string): PromiseLike<unknown> }): Promise<void> {
  await sql.unsafe('vacuum analyze');
  try {
    await sql.unsafe('checkpoint');
  } catch {
    // needs superuser or pg_checkpoint; skipped otherwise
  }
}
