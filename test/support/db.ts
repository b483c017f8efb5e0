import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { afterAll, inject } from 'vitest';
import { connect, type Sql } from '../../queue/db.ts';
import { withDatabase } from '../../scripts/lib/database-url.ts';

export interface TestDatabase {
  sql: Sql;
  url: string;
  name: string;
  /** Another client on the same database (for concurrent runners). */
  client(max?: number): Sql;
}

/**
 * Databases this test file created, dropped after its tests. Files call createTestDatabase inside
 * beforeAll, where vitest ignores a new afterAll (the databases were never dropped): this hook is
 * registered when the file imports this module, during collection.
 */
const created: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const drop of created.splice(0).reverse()) await drop();
});

/**
 * A fresh migrated database for this test file, cloned from the run's template and dropped
 * after the file's tests.
 */
export async function createTestDatabase(): Promise<TestDatabase> {
  const adminUrl = inject('adminDatabaseUrl');
  const template = inject('templateDatabase');
  const name = `sbt_${template.replace('sb_template_', '')}_${randomBytes(5).toString('hex')}`;
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  // Cloning needs the template to have no other connections; retry while another file clones it.
  for (let i = 0; ; i++) {
    try {
      await admin.unsafe(`create database ${name} template ${template}`);
      break;
    } catch (error) {
      if (i > 50 || !/being accessed by other users/.test(String((error as Error).message))) throw error;
      await new Promise((r) => setTimeout(r, 50 + Math.random() * 100));
    }
  }
  const url = withDatabase(adminUrl, name);
  const clients: Sql[] = [];
  const client = (max = 10) => {
    const c = connect(url, { max });
    clients.push(c);
    return c;
  };
  const sql = client();
  created.push(async () => {
    await Promise.all(clients.map((c) => c.end({ timeout: 5 })));
    await admin.unsafe(`drop database if exists ${name} with (force)`);
    await admin.end();
  });
  return { sql, url, name, client };
}
