import { randomBytes } from 'node:crypto';
import { readdirSync } from 'node:fs';
import postgres from 'postgres';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { connect } from '../../queue/db.ts';
import { migrate, MIGRATIONS_DIR } from '../../queue/migrate.ts';
import { withDatabase } from '../../scripts/lib/database-url.ts';

const admin = postgres(inject('adminDatabaseUrl'), { max: 1, onnotice: () => {} });
const name = `sbt_migrate_${randomBytes(4).toString('hex')}`;
afterAll(async () => {
  await admin.unsafe(`drop database if exists ${name} with (force)`);
  await admin.end();
});

describe('migrations', () => {
  it('apply each file once, in order, even when two migrators run at once', async () => {
    await admin.unsafe(`create database ${name}`);
    const url = withDatabase(inject('adminDatabaseUrl'), name);
    const a = connect(url, { max: 1 });
    const b = connect(url, { max: 1 });
    const [first, second] = await Promise.all([migrate(a), migrate(b)]);
    const files = readdirSync(MIGRATIONS_DIR).filter((f) => f.endsWith('.sql')).sort();
    expect([...first, ...second].sort()).toEqual(files);
    expect(first.length === 0 || second.length === 0).toBe(true);
    expect(await migrate(a)).toEqual([]);
    const applied = await a`select name from worker.schema_migrations order by name`;
    expect(applied.map((r) => r.name)).toEqual(files);
    await Promise.all([a.end(), b.end()]);
  });
});
