// Postgres matrix: the checked schema, which 15 dumps differently (a view's columns).
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { FUNCTION_FILE, MIGRATIONS_DIR } from '../../queue/migrate.ts';
import { dumpSchema } from '../../scripts/lib/schema-dump.ts';
import { createTestDatabase } from '../support/db.ts';

const SCHEMA_FILE = `${MIGRATIONS_DIR}schema.sql`;

/** Postgres 15 writes a view's columns with their table's name (`acc.id`), 16+ without: the file is 16+'s. */
function comparable(dump: string, major: number): string {
  return major >= 16 ? dump : dump.replace(/^(create (?:materialized )?view [^\n]+ as\n)[\s\S]*?;\n/gm, '$1  (body compared on Postgres 16+)\n');
}

describe('migrations/schema.sql', () => {
  it('is the dump of a freshly migrated database', async () => {
    const { sql } = await createTestDatabase();
    const [{ server_version_num: version }] = await sql<[{ server_version_num: string }]>`show server_version_num`;
    const major = Math.floor(Number(version) / 10000);
    const dump = comparable(await dumpSchema(sql), major);
    const committed = comparable(readFileSync(SCHEMA_FILE, 'utf8'), major);
    if (dump !== committed) {
      const a = committed.split('\n');
      const b = dump.split('\n');
      let line = 0;
      while (line < a.length && a[line] === b[line]) line++;
      throw new Error(
        `migrations/schema.sql is stale: it first differs at line ${line + 1}\n` +
          `  committed: ${JSON.stringify(a[line])}\n  database:  ${JSON.stringify(b[line])}\n` +
          'refresh it with `npm run schema` (and commit the file)',
      );
    }
  });

  it('has one file in migrations/functions for each function, holding all of its overloads', async () => {
    const { sql } = await createTestDatabase();
    const functions = await sql<{ name: string }[]>`
      select distinct format('%s.%s.sql', n.nspname, p.proname) as name
        from pg_proc p join pg_namespace n on n.oid = p.pronamespace
       where n.nspname in ('worker', 'platform')
       order by 1`;
    const files = readdirSync(`${MIGRATIONS_DIR}functions`).filter((f) => FUNCTION_FILE.test(f)).sort();
    expect(files).toEqual(functions.map((f) => f.name));
  });
});
