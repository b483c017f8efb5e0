import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { afterAll, inject } from 'vitest';
import { connect, type Sql } from '../../queue/db.ts';
import { MIGRATION_FILE, MIGRATIONS_DIR } from '../../queue/migrate.ts';
import { withDatabase } from '../../scripts/lib/database-url.ts';

const REPOSITORY = new URL('../../', import.meta.url).pathname;

const dirs: string[] = [];
const databases: string[] = [];
const clients: Sql[] = [];
const admin = postgres(inject('adminDatabaseUrl'), { max: 1, onnotice: () => {} });
afterAll(async () => {
  await Promise.all(clients.splice(0).map((c) => c.end({ timeout: 5 })));
  for (const name of databases.splice(0)) await admin.unsafe(`drop database if exists ${name} with (force)`);
  await admin.end();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function git(args: string[], repository = REPOSITORY): Buffer {
  return execFileSync('git', ['-C', repository, ...args], { maxBuffer: 64 * 1024 * 1024, stdio: ['ignore', 'pipe', 'pipe'] });
}

/**
 * The commit whose migrations/ is the release before migration `release` (say '0240'): the parent
 * on main (first parents) of the commit that brought that migration in, so a merge's own branch
 * history is never mistaken for a release. A migration no commit has yet (being written) makes
 * HEAD the previous release.
 */
export function releaseBefore(release: string, repository = REPOSITORY): string {
  const file = readdirSync(MIGRATIONS_DIR).find((f) => MIGRATION_FILE.test(f) && f.startsWith(`${release}_`));
  if (!file) throw new Error(`no migration ${release}_*.sql in migrations/`);
  let introduced: string;
  try {
    if (git(['rev-parse', '--is-shallow-repository'], repository).toString().trim() === 'true') {
      throw new Error('the checkout is a shallow clone');
    }
    introduced = git(['rev-list', '--first-parent', 'HEAD', '--', `migrations/${file}`], repository).toString().trim().split('\n').at(-1) ?? '';
  } catch (error) {
    throw new Error(
      `the migration tests build the release before ${release} from git history, which this checkout lacks ` +
        `(${(error as Error).message.split('\n')[0]}): run them in a full clone (git fetch --unshallow)`,
    );
  }
  return git(['rev-parse', introduced ? `${introduced}^1` : 'HEAD'], repository).toString().trim();
}

/**
 * An earlier release's migrations/ for the migration tests, exactly as git holds it at
 * releaseBefore(release): its migrations and each function file as that release had it.
 */
export function previousRelease(release: string): string {
  const dir = mkdtempSync(join(tmpdir(), `sbt-migrations-before-${release}-`));
  dirs.push(dir);
  const tar = git(['archive', '--format=tar', releaseBefore(release), 'migrations']);
  execFileSync('tar', ['-x', '-C', dir, '--strip-components=1'], { input: tar });
  return dir;
}

/** An empty database, dropped after the file's tests. */
export async function emptyDatabase(prefix: string): Promise<Sql> {
  const name = `${prefix}_${randomBytes(4).toString('hex')}`;
  databases.push(name);
  await admin.unsafe(`create database ${name}`);
  const sql = connect(withDatabase(inject('adminDatabaseUrl'), name), { max: 2 });
  clients.push(sql);
  return sql;
}
