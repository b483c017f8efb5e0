import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { Sql } from './db.ts';
import { appliedMigrations, functionHashes, bookkeepingTables, lockAndPrepare, recordFunction, recordMigration } from './driver/migrations.ts';

export const MIGRATIONS_DIR = fileURLToPath(new URL('../migrations/', import.meta.url));
/** The migration files' names; everything else in the folder (functions/, schema.sql) is not one. */
export const MIGRATION_FILE = /^\d{4}_[a-z0-9_]+\.sql$/;
/** <schema>.<function>.sql: every overload of that function, as it is now (create or replace). */
export const FUNCTION_FILE = /^[a-z_]+\.[a-z0-9_]+\.sql$/;

/**
 * Apply each migrations/*.sql file once, in file-name order, recording it in
 * worker.schema_migrations; then each migrations/functions/*.sql file whose content changed since
 * it was last applied (sha-256 in worker.schema_functions). Tables are history (a migration is
 * never edited once deployed); a function's file is its one current definition, so changing a
 * function is a diff of the lines that change. The functions come after the tables, and every one
 * is re-applied when any migration ran: a migration that drops or redefines a function (to change
 * its signature, say) never leaves the database on a definition other than its file's.
 *
 * One transaction holding an advisory lock: two migrators at once serialize (the second finds
 * nothing left to do), and a failing file applies nothing. Returns what it applied: migration
 * names, then `functions/<file>`. Migrations run from Node against Postgres directly, never
 * through Hyperdrive.
 */
export async function migrate(sql: Sql, dir = MIGRATIONS_DIR): Promise<string[]> {
  return (await sql.begin(async (tx) => {
    await lockAndPrepare(tx);
    const plan = await planMigration(dir, await appliedMigrations(tx), await functionHashes(tx));
    for (const file of plan.migrations) {
      await tx.unsafe(await readFile(`${dir}/${file}`, 'utf8'));
      await recordMigration(tx, file);
    }
    for (const f of plan.functions) {
      await tx.unsafe(f.text);
      await recordFunction(tx, f.file, f.sha256);
    }
    return [...plan.migrations, ...plan.functions.map((f) => `functions/${f.file}`)];
  }));
}

/** What migrate() would apply now. */
export interface PendingMigrations {
  /** Migration files not applied yet, in the order they would run. */
  migrations: string[];
  /** Function files (`functions/<file>`) whose content changed, or all of them when a migration runs. */
  functions: string[];
  /** The database has no bookkeeping tables yet: everything applies. */
  fresh: boolean;
}

/**
 * What migrate() would apply, read in a read-only transaction: nothing is created, locked or
 * changed (`npm run migrate -- --dry-run`). A migrator that runs meanwhile may leave less to do.
 */
export async function pendingMigrations(sql: Sql, dir = MIGRATIONS_DIR): Promise<PendingMigrations> {
  return (await sql.begin('read only', async (tx) => {
    const tables = await bookkeepingTables(tx);
    const plan = await planMigration(dir, tables.migrations ? await appliedMigrations(tx) : new Set(), tables.functions ? await functionHashes(tx) : new Map());
    const fresh = !tables.migrations;
    return { migrations: plan.migrations, functions: plan.functions.map((f) => `functions/${f.file}`), fresh };
  })) as PendingMigrations;
}

/**
 * The one choice of what to apply, for migrate() and its dry run: each migration file not in
 * `applied`, then each function file whose sha-256 differs from `hashes` (every one of them when
 * a migration runs).
 */
async function planMigration(dir: string, applied: Set<string>, hashes: Map<string, string>) {
  const files = (await readdir(dir)).filter((f) => MIGRATION_FILE.test(f)).sort();
  const functionsDir = `${dir}/functions`;
  const functionFiles = existsSync(functionsDir) ? (await readdir(functionsDir)).filter((f) => FUNCTION_FILE.test(f)).sort() : [];
  const migrations = files.filter((file) => !applied.has(file));
  const functions: Array<{ file: string; text: string; sha256: string }> = [];
  for (const file of functionFiles) {
    const text = await readFile(`${functionsDir}/${file}`, 'utf8');
    const sha256 = createHash('sha256').update(text).digest('hex');
    if (migrations.length === 0 && hashes.get(file) === sha256) continue;
    functions.push({ file, text, sha256 });
  }
  return { migrations, functions };
}
