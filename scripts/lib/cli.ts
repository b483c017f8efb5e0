import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const PROJECT_ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** Local state of `npm start` (embedded Postgres data, wrangler's local storage, dev secrets). */
export const DATA_DIR = process.env.STARBASE_DATA_DIR ?? `${PROJECT_ROOT}.data`;
/** Written by `npm start` while the dev stack runs, so the CLI finds its embedded Postgres. */
export const DEV_STACK_FILE = `${DATA_DIR}/dev-stack.json`;

export interface DevStackInfo {
  databaseUrl: string;
  workerUrl: string;
  sandboxUrl: string;
  token: string;
  pid: number;
}

export function readDevStack(): DevStackInfo | null {
  if (!existsSync(DEV_STACK_FILE)) return null;
  try {
    const info = JSON.parse(readFileSync(DEV_STACK_FILE, 'utf8')) as DevStackInfo;
    process.kill(info.pid, 0);
    return info;
  } catch {
    return null;
  }
}

/** DATABASE_URL, else the running dev stack's database, else a clear error. */
export function resolveDatabaseUrl(): string {
  const url = process.env.DATABASE_URL ?? readDevStack()?.databaseUrl;
  if (!url) {
    fail('DATABASE_URL is not set and no dev stack is running: set DATABASE_URL=postgres://… or start `npm start` first');
  }
  return url;
}

export function fail(message: string): never {
  console.error(`error: ${message}`);
  process.exit(2);
}

/** Prints rows as an aligned text table. */
export function printTable(rows: Array<Record<string, unknown>>, empty = '(none)'): void {
  if (rows.length === 0) {
    console.log(`  ${empty}`);
    return;
  }
  const cols = Object.keys(rows[0]!);
  const cell = (v: unknown) => (v instanceof Date ? v.toISOString() : v === null || v === undefined ? '-' : String(v));
  const widths = cols.map((c) => Math.max(c.length, ...rows.map((r) => cell(r[c]).length)));
  const line = (vals: string[]) => '  ' + vals.map((v, i) => v.padEnd(widths[i]!)).join('  ');
  console.log(line(cols));
  for (const r of rows) console.log(line(cols.map((c) => cell(r[c]))));
}

export function formatAge(ms: number): string {
  const s = Math.floor(ms / 1000);
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.floor(s / 60)}m`;
  return `${Math.floor(s / 3600)}h${Math.floor((s % 3600) / 60)}m`;
}
