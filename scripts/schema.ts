import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { connect } from '../queue/db.ts';
import { migrate } from '../queue/migrate.ts';
import { startEmbeddedPostgres } from './embedded-postgres.ts';
import { withDatabase } from './lib/database-url.ts';
import { exitOnDatabaseError, parseCli, PROJECT_ROOT } from './lib/cli.ts';
import { dumpSchema } from './lib/schema-dump.ts';

export const SCHEMA_FILE = join(PROJECT_ROOT, 'migrations', 'schema.sql');

// `npm run schema`: migrate a new, empty database (on DATABASE_URL's server, else a throwaway
// embedded one), write its dump to migrations/schema.sql, drop the database.
parseCli({
  command: 'npm run schema',
  usage: `usage: npm run schema
Migrates a new, empty database (on DATABASE_URL's server, Postgres 16 or later; else a throwaway
embedded one), writes its dump to migrations/schema.sql, and drops the database.

  -h, --help  this help`,
});
if (process.env.DATABASE_URL) exitOnDatabaseError(process.env.DATABASE_URL);
const dataDir = process.env.DATABASE_URL ? undefined : mkdtempSync(join(tmpdir(), 'starbase-schema-pg-'));
const pg = dataDir ? await startEmbeddedPostgres({ dataDir, persistent: false }) : undefined;
const serverUrl = pg?.url ?? process.env.DATABASE_URL!;
const name = `sb_schema_${randomBytes(4).toString('hex')}`;
const admin = postgres(serverUrl, { max: 1, onnotice: () => {} });
try {
  await admin.unsafe(`create database ${name}`);
  const sql = connect(withDatabase(serverUrl, name), { max: 1 });
  try {
    // Postgres 16 deparses a view's columns without their table's name where 15 kept it: the file
    // is the 16+ text, and schema.test.ts on 15 compares all but views' bodies.
    const [{ server_version_num: version }] = await sql<[{ server_version_num: string }]>`show server_version_num`;
    if (Number(version) < 160000) throw new Error(`Postgres ${version} at ${serverUrl}: generate the schema on Postgres 16 or later (unset DATABASE_URL for the embedded one)`);
    await migrate(sql);
    writeFileSync(SCHEMA_FILE, await dumpSchema(sql));
  } finally {
    await sql.end();
  }
  console.log(`wrote ${SCHEMA_FILE}`);
} finally {
  await admin.unsafe(`drop database if exists ${name} with (force)`);
  await admin.end();
  await pg?.stop();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
}
