import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import type { TestProject } from 'vitest/node';
import { migrate } from '../../queue/migrate.ts';
import { EMBEDDED_MAJORS, startEmbeddedPostgres, type EmbeddedMajor } from '../../scripts/embedded-postgres.ts';
import { withDatabase, withPassword } from '../../scripts/lib/database-url.ts';
import { allProviders } from '../../sandbox/providers.ts';
import { startSandbox } from '../../sandbox/server.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** An admin connection string to the server the tests use. */
    adminDatabaseUrl: string;
    /** A migrated database that each test file clones. */
    templateDatabase: string;
    /** The sandbox server (Depot, DigitalOcean, Stripe) for tests inside workerd. */
    sandboxUrl: string;
    /**
     * The clock tests' database: the Worker's own Hyperdrive binding points at it, because the
     * dispatchers (Durable Objects) connect through the binding they were deployed with, not
     * through a test file's override. Clock test files share it and keep apart by pool.
     */
    clockDatabaseUrl: string;
  }
}

/**
 * One Postgres for the whole run: DATABASE_URL when set, otherwise an embedded one in a temp
 * folder (17, or 18 with STARBASE_TEST_PG_MAJOR=18). Migrations run once into a template database;
 * each test file clones it (fast, and files never share state, so they run in parallel).
 */
export default async function setup(project: TestProject) {
  // (a password too: the Worker tests' Hyperdrive binding refuses a connection string without one)
  let adminUrl = process.env.DATABASE_URL ? withPassword(process.env.DATABASE_URL) : undefined;
  let stop = async () => {};
  if (!adminUrl) {
    const wanted = Number(process.env.STARBASE_TEST_PG_MAJOR ?? 17);
    if (!EMBEDDED_MAJORS.includes(wanted as EmbeddedMajor)) {
      throw new Error(`STARBASE_TEST_PG_MAJOR=${wanted} has no embedded server (${EMBEDDED_MAJORS.join(', ')} do): set DATABASE_URL to a Postgres ${wanted}`);
    }
    const pg = await startEmbeddedPostgres({ dataDir: mkdtempSync(join(tmpdir(), 'starbase-test-pg-')), persistent: false, major: wanted as EmbeddedMajor });
    adminUrl = pg.url;
    stop = pg.stop;
  }
  const template = `sb_template_${process.pid}`;
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  // Which server the run is on, in the output; STARBASE_TEST_PG_MAJOR (set by `npm run test:pg15`
  // and `test:pg18`) makes a run on another major version fail instead of passing for the wrong reason.
  const [{ server_version: version }] = await admin<[{ server_version: string }]>`show server_version`;
  const { hostname, port } = new URL(adminUrl);
  console.log(`tests on Postgres ${version} at ${hostname}:${port}${process.env.DATABASE_URL ? ' (DATABASE_URL)' : ' (embedded)'}`);
  const wanted = process.env.STARBASE_TEST_PG_MAJOR;
  if (wanted && version.split('.')[0] !== wanted) {
    await admin.end();
    await stop();
    throw new Error(`STARBASE_TEST_PG_MAJOR=${wanted} but the server at ${hostname}:${port} runs Postgres ${version}`);
  }
  await admin.unsafe(`drop database if exists ${template}`);
  await admin.unsafe(`create database ${template}`);
  const templateSql = postgres(withDatabase(adminUrl, template), { max: 1, onnotice: () => {} });
  await migrate(templateSql as never);
  await templateSql.end();
  const clockDatabase = `sbc_${process.pid}`;
  await admin.unsafe(`drop database if exists ${clockDatabase} with (force)`);
  await admin.unsafe(`create database ${clockDatabase} template ${template}`);
  const sandbox = await startSandbox({ providers: allProviders() });
  project.provide('adminDatabaseUrl', adminUrl);
  project.provide('templateDatabase', template);
  project.provide('sandboxUrl', sandbox.url);
  project.provide('clockDatabaseUrl', withDatabase(adminUrl, clockDatabase));
  return async () => {
    // (each step even when one before it throws: an embedded server left running outlives the run)
    try {
      await sandbox.close();
      // What a file's own afterAll did not drop (it failed, or the file was killed): this run's
      // databases only, named sbt_<pid>_… (Node files) and sbw_<pid>_… (Worker files), so runs
      // sharing a server never drop each other's. (`_` is a LIKE wildcard: sbt_12_% would also
      // match run 123's sbt_123_…, hence the escapes.)
      const prefixes = [`sbt\\_${process.pid}\\_%`, `sbw\\_${process.pid}\\_%`];
      const leftovers = await admin`select datname from pg_database where datname like any(${prefixes})`;
      for (const { datname } of leftovers) await admin.unsafe(`drop database if exists ${datname} with (force)`);
      await admin.unsafe(`drop database if exists ${clockDatabase} with (force)`);
      await admin.unsafe(`drop database if exists ${template} with (force)`);
    } finally {
      await admin.end();
      await stop();
    }
  };
}

