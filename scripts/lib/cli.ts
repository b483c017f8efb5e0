import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs, type ParseArgsOptionsConfig } from 'node:util';

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

/**
 * DATABASE_URL, else the running dev stack's database, else a clear error. From here on a
 * database the script cannot reach ends it with one line, not a stack trace (exitOnDatabaseError).
 */
export function resolveDatabaseUrl(): string {
  const url = process.env.DATABASE_URL ?? readDevStack()?.databaseUrl;
  if (!url) {
    fail('DATABASE_URL is not set and no dev stack is running: set DATABASE_URL=postgres://… or start `npm start` first');
  }
  exitOnDatabaseError(url);
  return url;
}

/** Where a connection string points, for messages: host:port/database, never the user's password. */
export function databaseLocation(url: string): string {
  try {
    const u = new URL(url);
    const socket = u.searchParams.get('host');
    const host = u.hostname ? `${decodeURIComponent(u.hostname)}:${u.port || '5432'}` : (socket ?? process.env.PGHOST ?? 'the default socket');
    return `${host}${u.pathname.length > 1 ? u.pathname : ''}`;
  } catch {
    return 'DATABASE_URL (not a valid URL)';
  }
}

/** What the errors of a database that cannot be reached mean (Node's system errors, postgres.js's own). */
const UNREACHABLE: Record<string, string> = {
  ECONNREFUSED: 'connection refused: nothing listens there',
  ENOTFOUND: 'no such host',
  EAI_AGAIN: 'the host name could not be resolved',
  ETIMEDOUT: 'timed out',
  CONNECT_TIMEOUT: 'timed out connecting',
  ECONNRESET: 'the connection was reset',
  EHOSTUNREACH: 'the host is unreachable',
  ENETUNREACH: 'the network is unreachable',
  ENOENT: 'no socket there',
  CONNECTION_CLOSED: 'the server closed the connection',
  CONNECTION_ENDED: 'the connection ended',
};
/** The server's refusals of a connection (SQLSTATE): its message says why. */
const REFUSED = new Set(['28P01', '28000', '3D000', '57P03', '53300', '08001', '08004', '08006']);

/**
 * One line for an error of connecting to the database at `url`: where (host, port, database;
 * never the password) and the cause. Null for any other error.
 */
export function databaseConnectionError(error: unknown, url: string): string | null {
  const e = error as { code?: unknown; message?: unknown } | null;
  const code = typeof e?.code === 'string' ? e.code : '';
  const cause = UNREACHABLE[code] ? `${UNREACHABLE[code]} (${code})` : REFUSED.has(code) ? `${String(e!.message)} (${code})` : null;
  if (!cause) return null;
  let line = `cannot connect to the database at ${databaseLocation(url)}: ${cause}`;
  const password = (() => {
    try {
      return decodeURIComponent(new URL(url).password);
    } catch {
      return '';
    }
  })();
  if (password) line = line.replaceAll(password, '***');
  return line;
}

let watchedUrl: string | undefined;
/**
 * A script's failures to reach the database at `url` (thrown anywhere, its top level included)
 * end it with one line on stderr and exit 1. Any other error is printed as Node would, exit 1.
 */
export function exitOnDatabaseError(url: string): void {
  const installed = watchedUrl !== undefined;
  watchedUrl = url;
  if (installed) return;
  const report = (error: unknown) => {
    const line = databaseConnectionError(error, watchedUrl!);
    console.error(line ? `error: ${line}` : error);
    process.exit(1);
  };
  process.on('uncaughtException', report);
  process.on('unhandledRejection', report);
}

/** How a script describes itself to parseCli. */
export interface CliSpec<O extends ParseArgsOptionsConfig> {
  /** How it is run, e.g. `npm run migrate`: the pointer to its help names it. */
  command: string;
  /** What `--help` prints: lines within 100 columns. */
  usage: string;
  options?: O;
  allowPositionals?: boolean;
  args?: string[];
}

/**
 * util.parseArgs with what every script owes its user: `--help` (or `-h`) prints the usage and
 * exits 0 before anything is touched; a usage error prints the error and one line pointing to
 * --help, and exits 2.
 */
export function parseCli<O extends ParseArgsOptionsConfig>(spec: CliSpec<O>) {
  const args = spec.args ?? process.argv.slice(2);
  if (args.includes('--help') || args.includes('-h')) {
    console.log(spec.usage);
    process.exit(0);
  }
  try {
    return parseArgs({ args, options: spec.options ?? ({} as O), allowPositionals: spec.allowPositionals ?? false, strict: true });
  } catch (error) {
    return usageError(spec.command, (error as Error).message);
  }
}

/** The widest line of a help text: a terminal of 100 columns shows it unwrapped. */
export const HELP_WIDTH = 100;

/**
 * `text` wrapped at word boundaries into lines of at most `width` columns, each starting with
 * `indent` (the first with `first`, when given). A word longer than a line stays whole.
 */
export function wrap(text: string, indent: string, options: { first?: string; width?: number } = {}): string[] {
  const width = options.width ?? HELP_WIDTH;
  const lines: string[] = [];
  let line = options.first ?? indent;
  let empty = true;
  for (const word of text.split(/\s+/).filter(Boolean)) {
    if (!empty && line.length + 1 + word.length > width) {
      lines.push(line);
      line = indent;
      empty = true;
    }
    line += (empty ? '' : ' ') + word;
    empty = false;
  }
  lines.push(line);
  return lines;
}

/** A usage error: the message, and where the usage is. Exit 2. */
export function usageError(command: string, message: string): never {
  console.error(`error: ${message}`);
  console.error(helpHint(command));
  process.exit(2);
}

export function helpHint(command: string): string {
  return `(\`${command} -- --help\` shows the usage)`;
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
