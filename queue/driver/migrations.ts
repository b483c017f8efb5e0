import type { Queryable } from '../db.ts';
import { record, text } from './rows.ts';

/** The migrator's bookkeeping in worker.schema_migrations and worker.schema_functions (queue/migrate.ts runs them). */

// Any constant works; it only has to be the same for every migrator of this schema.
const MIGRATION_LOCK_ID = 0x5b_a5e_001;

/** Serialize migrators (held to the end of the transaction), and create the bookkeeping tables on a new database. */
export async function lockAndPrepare(tx: Queryable): Promise<void> {
  await tx`select pg_advisory_xact_lock(${MIGRATION_LOCK_ID})`;
  await tx`create schema if not exists worker`;
  await tx`create table if not exists worker.schema_migrations (
             name text primary key, applied_at timestamptz not null default now())`;
  await tx`create table if not exists worker.schema_functions (
             name text primary key, sha256 text not null, applied_at timestamptz not null default now())`;
}

/** Which bookkeeping tables exist: none on a database never migrated. */
export async function bookkeepingTables(tx: Queryable): Promise<{ migrations: boolean; functions: boolean }> {
  const [row] = await tx`select to_regclass('worker.schema_migrations') is not null as migrations,
                                to_regclass('worker.schema_functions') is not null as functions`;
  const r = record(row, 'bookkeeping row');
  return { migrations: r.migrations === true, functions: r.functions === true };
}

export async function appliedMigrations(tx: Queryable): Promise<Set<string>> {
  const rows = await tx`select name from worker.schema_migrations`;
  return new Set(rows.map((r) => text(record(r, 'schema_migrations row').name, 'name')));
}

export async function recordMigration(tx: Queryable, name: string): Promise<void> {
  await tx`insert into worker.schema_migrations (name) values (${name})`;
}

/** Each function file's sha-256 as last applied. */
export async function functionHashes(tx: Queryable): Promise<Map<string, string>> {
  const rows = await tx`select name, sha256 from worker.schema_functions`;
  return new Map(rows.map((row) => {
    const r = record(row, 'schema_functions row');
    return [text(r.name, 'name'), text(r.sha256, 'sha256')];
  }));
}

export async function recordFunction(tx: Queryable, name: string, sha256: string): Promise<void> {
  await tx`insert into worker.schema_functions (name, sha256) values (${name}, ${sha256})
           on conflict (name) do update set sha256 = excluded.sha256, applied_at = now()`;
}
