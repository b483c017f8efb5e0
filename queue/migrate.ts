import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { Sql } from './db.ts';

export const MIGRATIONS_DIR = fileURLToPath(new URL('../migrations/', import.meta.url));

// Any constant works; it only has to be the same for every migrator of this schema.
const MIGRATION_LOCK_ID = 0x5b_a5e_001;

/**
 * Apply each migrations/*.sql file once, in file-name order, recording it in
 * worker.schema_migrations. One transaction holding an advisory lock: two migrators at once
 * serialize (the second finds nothing left to do), and a failing file applies nothing.
 * Migrations run from Node against Postgres directly, never through Hyperdrive.
 */
export async function migrate(sql: Sql, dir = MIGRATIONS_DIR): Promise<string[]> {
  const files = (await readdir(dir)).filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f)).sort();
  return (await sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(${MIGRATION_LOCK_ID})`;
    await tx`create schema if not exists worker`;
    await tx`create table if not exists worker.schema_migrations (
               name text primary key, applied_at timestamptz not null default now())`;
    const applied = new Set((await tx`select name from worker.schema_migrations`).map((r) => r.name as string));
    const done: string[] = [];
    for (const file of files) {
      if (applied.has(file)) continue;
      await tx.unsafe(await readFile(`${dir}/${file}`, 'utf8'));
      await tx`insert into worker.schema_migrations (name) values (${file})`;
      done.push(file);
    }
    return done;
  })) as string[];
}
