import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { PROJECT_ROOT } from '../../scripts/lib/cli.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';

/**
 * What every script behind an npm script owes its user: `--help` prints its usage within 100
 * columns and exits 0 having touched nothing; a usage error is the error and one line pointing to
 * --help (exit 2); a database it cannot reach is one line naming the host and the cause, never
 * the password (exit 1). And `npm run migrate -- --dry-run` says what would apply, changing nothing.
 */
let db: TestDatabase;
const scratch = mkdtempSync(join(tmpdir(), 'starbase-cli-help-'));
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A database URL nothing answers, with a password that must never be printed. */
const PASSWORD = 'hunter2-never-printed';
const UNREACHABLE = `postgres://ops:${PASSWORD}@127.0.0.1:1/starbase`;

interface Ran {
  code: number | null;
  out: string;
  lines: string[];
}

function run(command: string, args: string[], env: Record<string, string> = {}): Promise<Ran> {
  const child = spawn(command, args, {
    cwd: PROJECT_ROOT,
    env: { ...process.env, WRANGLER_SEND_METRICS: 'false', STARBASE_DATA_DIR: join(scratch, 'data'), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  // 'close', not 'exit': at exit the last output can still be in the pipe
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, out, lines: out.trimEnd().split('\n') })));
}

/** A script as its npm script runs it, without npm's banner. */
const script = (file: string, args: string[], env: Record<string, string> = {}) => run(process.execPath, ['--import', 'tsx', `scripts/${file}.ts`, ...args], env);

/** Runs `jobs` two at a time: the machine is shared. */
async function twoAtATime<T>(jobs: Array<() => Promise<T>>): Promise<T[]> {
  const results: T[] = [];
  for (let i = 0; i < jobs.length; i += 2) results.push(...(await Promise.all(jobs.slice(i, i + 2).map((job) => job()))));
  return results;
}

/** The npm scripts that run a script of this project (not a tool's own CLI: wrangler, vitest, tsc). */
const SCRIPTS = Object.entries((JSON.parse(readFileSync(join(PROJECT_ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts)
  .filter(([, command]) => /(?:scripts\/[\w-]+\.ts|bench\/[\w-]+\.sh)\b/.test(command))
  .map(([name]) => name);

/** Files a script with side effects would write: the generated ones, and the data folder. */
function snapshot(): string {
  const generated = ['migrations/schema.sql', 'docs/openapi.json', 'test/support/openapi.d.ts'].map((f) => `${f} ${statSync(join(PROJECT_ROOT, f)).mtimeMs}`);
  let data: string[] = [];
  try {
    data = readdirSync(join(scratch, 'data'));
  } catch {
    // never created: as it should be
  }
  return [...generated, ...data].join('\n');
}

describe('--help', () => {
  it('is every npm script of the project', () => {
    expect(SCRIPTS).toEqual(expect.arrayContaining(['start', 'migrate', 'produce', 'ops', 'inspect', 'worker', 'schema', 'openapi', 'soak', 'bench', 'sandbox', 'talos:store', 'bench:instructions']));
  });

  it('prints the usage within 100 columns and exits 0, touching nothing (not even an unreachable database)', async () => {
    const before = snapshot();
    const runs = await twoAtATime(SCRIPTS.map((name) => () => run('npm', ['run', '-s', name, '--', '--help'], { DATABASE_URL: UNREACHABLE })));
    for (const [i, name] of SCRIPTS.entries()) {
      const { code, out, lines } = runs[i]!;
      expect(code, `${name}: ${out}`).toBe(0);
      expect(out, name).toMatch(/^usage: /);
      expect(lines.filter((line) => line.length > 100), name).toEqual([]);
      expect(out, name).not.toMatch(/^error:|ECONNREFUSED|\n\s+at /m);
    }
    expect(snapshot()).toBe(before);
  }, 180_000);
});

describe('usage errors', () => {
  it('print the error and where the help is, exit 2', async () => {
    const cases: Array<[string, string[], RegExp]> = [
      ['migrate', ['--dry-rum'], /Unknown option '--dry-rum'/],
      ['produce', ['--colour'], /Unknown option '--colour'/],
      ['ops', ['depth', '--colour'], /Unknown option '--colour'/],
      ['ops', ['requeue'], /requeue needs a job id/],
      ['worker', ['--concurrency', 'lots'], /--concurrency must be an integer/],
      ['worker', ['--colour'], /Unknown option '--colour'/],
      ['soak', ['--colour'], /Unknown option '--colour'/],
      ['talos-store', ['only-one.yaml'], /give the two files/],
      ['bench', ['--runs', '0'], /--runs must be an integer >= 1, got "0"/],
      ['bench', ['--colour'], /Unknown option '--colour'/],
    ];
    const runs = await twoAtATime(cases.map(([file, args]) => () => script(file, args, { DATABASE_URL: UNREACHABLE })));
    for (const [i, [file, args, error]] of cases.entries()) {
      const { code, out, lines } = runs[i]!;
      expect(code, `${file} ${args.join(' ')}: ${out}`).toBe(2);
      expect(lines[0], file).toMatch(/^error: /);
      expect(lines[0], file).toMatch(error);
      expect(lines.at(-1), file).toMatch(/-- --help` shows the usage/);
      expect(lines, file).toHaveLength(2);
    }
  }, 120_000);

  it("ops: an unknown command names the commands, within 100 columns, without the whole help", async () => {
    const { code, lines } = await script('ops', ['frobnicate']);
    expect(code).toBe(2);
    expect(lines[0]).toBe('error: unknown command "frobnicate"');
    expect(lines.join(' ')).toMatch(/the commands: inspect, depth, .*resume-pool/);
    expect(lines.at(-1)).toBe('(`npm run ops -- --help` shows the usage)');
    expect(lines.filter((line) => line.length > 100)).toEqual([]);
    expect(lines.join('\n')).not.toContain('usage:');
  });
});

describe('a database that cannot be reached', () => {
  it('is one line naming the host and the cause, never the password; exit 1', async () => {
    const machine = (type: string) => {
      const file = join(scratch, `${type}.yaml`);
      writeFileSync(file, `version: v1alpha1\nmachine:\n  type: ${type}\n  token: t\ncluster:\n  clusterName: demo\n`);
      return file;
    };
    const cases: Array<[string, string[], Record<string, string>]> = [
      ['migrate', [], {}],
      ['migrate', ['--dry-run'], {}],
      ['produce', ['--count', '2'], {}],
      ['ops', ['depth'], {}],
      ['inspect', [], {}],
      ['worker', ['--drain'], {}],
      ['talos-store', [machine('controlplane'), machine('worker')], { ENCRYPTION_KEYS: `k1:${Buffer.alloc(32, 7).toString('base64')}` }],
      ['schema', [], {}],
      ['soak', ['--model', '--seconds', '1'], {}],
    ];
    const runs = await twoAtATime(cases.map(([file, args, env]) => () => script(file, args, { DATABASE_URL: UNREACHABLE, ...env })));
    for (const [i, [file, args]] of cases.entries()) {
      const { code, out, lines } = runs[i]!;
      const name = `${file} ${args.join(' ')}`;
      expect(code, `${name}: ${out}`).toBe(1);
      expect(lines.filter((line) => !line.startsWith('[soak --model]')), name).toEqual([
        'error: cannot connect to the database at 127.0.0.1:1/starbase: connection refused: nothing listens there (ECONNREFUSED)',
      ]);
      expect(out, name).not.toContain(PASSWORD);
    }
  }, 180_000);

  it('says so for an unknown host, a wrong password and npm start', async () => {
    const unknownHost = await script('migrate', [], { DATABASE_URL: `postgres://ops:${PASSWORD}@db.invalid:6543/starbase` });
    expect(unknownHost).toMatchObject({ code: 1, lines: ['error: cannot connect to the database at db.invalid:6543/starbase: no such host (ENOTFOUND)'] });
    const wrong = new URL(db.url);
    wrong.password = PASSWORD;
    const refused = await script('migrate', ['--status'], { DATABASE_URL: wrong.toString() });
    expect(refused.code).toBe(1);
    expect(refused.lines).toHaveLength(1);
    expect(refused.out).toMatch(new RegExp(`^error: cannot connect to the database at 127\\.0\\.0\\.1:${wrong.port}/${db.name}: password authentication failed .*\\(28P01\\)`));
    expect(refused.out).not.toContain(PASSWORD);
    const start = await script('dev', [], { DATABASE_URL: UNREACHABLE });
    expect(start.code).toBe(1);
    expect(start.out).toContain('error: cannot connect to the database at 127.0.0.1:1/starbase: connection refused');
    expect(start.out).not.toMatch(/\n\s+at /);
    expect(start.out).not.toContain(PASSWORD);
  }, 120_000);
});

describe('npm run migrate -- --dry-run', () => {
  const migrate = (args: string[], url = db.url) => script('migrate', args, { DATABASE_URL: url });
  const bookkeeping = async () => JSON.stringify([
    await db.sql`select name from worker.schema_migrations order by name`,
    await db.sql`select name, sha256 from worker.schema_functions order by name`,
  ]);

  it('on a database up to date: nothing to apply', async () => {
    const dry = await migrate(['--dry-run']);
    expect(dry).toMatchObject({ code: 0, lines: [expect.stringMatching(/^up to date: nothing to apply on 127\.0\.0\.1:\d+\//)] });
  });

  it('lists a changed function file, changes nothing; the migrate then applies just that', async () => {
    const [fn] = await db.sql<[{ name: string }]>`select name from worker.schema_functions order by name limit 1`;
    await db.sql`update worker.schema_functions set sha256 = 'changed' where name = ${fn.name}`;
    const before = await bookkeeping();
    for (const flag of ['--dry-run', '--status']) {
      const dry = await migrate([flag]);
      expect(dry.code).toBe(0);
      expect(dry.lines.slice(1)).toEqual(['  1 function file(s) whose content changed:', `    functions/${fn.name}`]);
      expect(dry.lines[0]).toMatch(/^would apply on .*, nothing changed:$/);
    }
    expect(await bookkeeping()).toBe(before);
    expect(await migrate([])).toMatchObject({ code: 0, lines: [`applied: functions/${fn.name}`] });
    expect((await migrate(['--dry-run'])).out).toMatch(/^up to date/);
  });

  it('lists a pending migration, and every function file with it', async () => {
    const [last] = await db.sql<[{ name: string }]>`select name from worker.schema_migrations order by name desc limit 1`;
    await db.sql`delete from worker.schema_migrations where name = ${last.name}`;
    const functions = readdirSync(join(PROJECT_ROOT, 'migrations', 'functions')).filter((f) => f.endsWith('.sql'));
    try {
      const before = await bookkeeping();
      const dry = await migrate(['--dry-run']);
      expect(dry.code).toBe(0);
      expect(dry.lines.slice(1, 3)).toEqual(['  1 migration(s):', `    ${last.name}`]);
      expect(dry.lines[3]).toBe(`  ${functions.length} function file(s), every one: a migration runs:`);
      expect(await bookkeeping()).toBe(before);
    } finally {
      await db.sql`insert into worker.schema_migrations (name) values (${last.name})`;
    }
  });

  it('on a database never migrated: every migration, and it creates nothing', async () => {
    const admin = postgres(inject('adminDatabaseUrl'), { max: 1, onnotice: () => {} });
    const name = `${db.name}_empty`;
    await admin.unsafe(`create database ${name}`);
    try {
      const url = new URL(db.url);
      url.pathname = `/${name}`;
      const dry = await migrate(['--dry-run'], url.toString());
      expect(dry.code).toBe(0);
      expect(dry.lines[0]).toMatch(/\(never migrated\), nothing changed:$/);
      const migrations = readdirSync(join(PROJECT_ROOT, 'migrations')).filter((f) => /^\d{4}_.*\.sql$/.test(f));
      expect(dry.lines[1]).toBe(`  ${migrations.length} migration(s):`);
      const empty = postgres(url.toString(), { max: 1, onnotice: () => {} });
      try {
        expect(await empty`select 1 from pg_namespace where nspname = 'worker'`).toHaveLength(0);
      } finally {
        await empty.end();
      }
    } finally {
      await admin.unsafe(`drop database if exists ${name} with (force)`);
      await admin.end();
    }
  });
});
