import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { Sql } from './db.ts';
import { appliedMigrations, functionHashes, lockAndPrepare, recordFunction, recordMigration } from './driver/migrations.ts';

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
  const files = (await readdir(dir)).filter((f) => MIGRATION_FILE.test(f)).sort();
  const functionsDir = `${dir}/functions`;
  const functionFiles = existsSync(functionsDir) ? (await readdir(functionsDir)).filter((f) => FUNCTION_FILE.test(f)).sort() : [];
  return (await sql.begin(async (tx) => {
    await lockAndPrepare(tx);
    const applied = await appliedMigrations(tx);
    const done: string[] = [];
    for (const file of files) {
      if (applied.has(file)) continue;
      await tx.unsafe(await readFile(`${dir}/${file}`, 'utf8'));
      await recordMigration(tx, file);
      done.push(file);
    }
    const migrated = done.length > 0;
    const hashes = await functionHashes(tx);
    for (const file of functionFiles) {
      const text = await readFile(`${functionsDir}/${file}`, 'utf8');
      const sha256 = createHash('sha256').update(text).digest('hex');
      if (!migrated && hashes.get(file) === sha256) continue;
      await tx.unsafe(text);
      await recordFunction(tx, file, sha256);
      done.push(`functions/${file}`);
    }
    return done;
  }));
}
