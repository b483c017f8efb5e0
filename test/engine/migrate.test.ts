// Postgres matrix: migrations (concurrent migrators).
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { connect, type Sql } from '../../queue/db.ts';
import { FUNCTION_FILE, migrate, MIGRATION_FILE, MIGRATIONS_DIR } from '../../queue/migrate.ts';
import { withDatabase } from '../../scripts/lib/database-url.ts';

const admin = postgres(inject('adminDatabaseUrl'), { max: 1, onnotice: () => {} });
const names: string[] = [];
const dirs: string[] = [];
afterAll(async () => {
  for (const name of names) await admin.unsafe(`drop database if exists ${name} with (force)`);
  await admin.end();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** Two clients on a new, empty database. */
async function emptyDatabase(): Promise<[Sql, Sql]> {
  const name = `sbt_migrate_${randomBytes(4).toString('hex')}`;
  names.push(name);
  await admin.unsafe(`create database ${name}`);
  const url = withDatabase(inject('adminDatabaseUrl'), name);
  return [connect(url, { max: 1 }), connect(url, { max: 1 })];
}

/** A copy of migrations/ (links to its files) whose files the test can add to and rewrite. */
function migrationsCopy(): string {
  const dir = mkdtempSync(join(tmpdir(), 'sbt-migrations-'));
  dirs.push(dir);
  mkdirSync(join(dir, 'functions'));
  for (const f of migrationFiles) symlinkSync(join(MIGRATIONS_DIR, f), join(dir, f));
  for (const f of functionFiles) writeFileSync(join(dir, 'functions', f), readFileSync(join(MIGRATIONS_DIR, 'functions', f)));
  return dir;
}

const migrationFiles = readdirSync(MIGRATIONS_DIR).filter((f) => MIGRATION_FILE.test(f)).sort();
const functionFiles = readdirSync(join(MIGRATIONS_DIR, 'functions')).filter((f) => FUNCTION_FILE.test(f)).sort();
const BOUNDS = 'worker.step_duration_bounds.sql';
const bounds = async (sql: Sql) => (await sql<[{ b: number[] }]>`select worker.step_duration_bounds() as b`)[0].b;

describe('migrations', () => {
  it('apply each file once, in order, even when two migrators run at once; then each function file', async () => {
    const [a, b] = await emptyDatabase();
    const [first, second] = await Promise.all([migrate(a), migrate(b)]);
    const expected = [...migrationFiles, ...functionFiles.map((f) => `functions/${f}`)];
    expect(first.length === 0 ? second : first).toEqual(expected);
    expect(first.length === 0 || second.length === 0).toBe(true);
    expect(await migrate(a)).toEqual([]);
    const applied = await a`select name from worker.schema_migrations order by name`;
    expect(applied.map((r) => r.name)).toEqual(migrationFiles);
    const functions = await a`select name from worker.schema_functions order by name`;
    expect(functions.map((r) => r.name)).toEqual(functionFiles);
    await Promise.all([a.end(), b.end()]);
  });

  it('re-apply a function file when its content changes, once even when two migrators run at once', async () => {
    const dir = migrationsCopy();
    const [a, b] = await emptyDatabase();
    await migrate(a, dir);
    expect(await bounds(a)).toEqual([0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300]);
    const file = join(dir, 'functions', BOUNDS);
    writeFileSync(file, readFileSync(file, 'utf8').replace('{0.01,', '{0.001,0.01,'));
    const [first, second] = await Promise.all([migrate(a, dir), migrate(b, dir)]);
    expect([...first, ...second]).toEqual([`functions/${BOUNDS}`]);
    expect(await bounds(b)).toEqual([0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300]);
    expect(await migrate(a, dir)).toEqual([]);
    await Promise.all([a.end(), b.end()]);
  });

  it('re-apply every function file after a migration ran, so a migration never leaves a function other than its file', async () => {
    const dir = migrationsCopy();
    const [a, b] = await emptyDatabase();
    await migrate(a, dir);
    writeFileSync(join(dir, '9999_redefines.sql'), "create or replace function worker.step_duration_bounds() returns float8[] language sql immutable as $$ select '{1}'::float8[] $$;");
    expect(await migrate(a, dir)).toEqual(['9999_redefines.sql', ...functionFiles.map((f) => `functions/${f}`)]);
    expect(await bounds(a)).toEqual([0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300]);
    await Promise.all([a.end(), b.end()]);
  });

  it('apply a failing function file not at all, nor the migrations of the same run', async () => {
    const dir = migrationsCopy();
    const [a, b] = await emptyDatabase();
    writeFileSync(join(dir, 'functions', BOUNDS), 'create or replace function worker.step_duration_bounds() returns float8[] language sql as $$ select nonsense $$;');
    await expect(migrate(a, dir)).rejects.toThrow(/nonsense/);
    expect(await a`select 1 from pg_namespace where nspname in ('worker', 'platform')`).toHaveLength(0);
    await Promise.all([a.end(), b.end()]);
  });
});
