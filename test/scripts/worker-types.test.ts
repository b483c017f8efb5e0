import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../scripts/lib/cli.ts';

/**
 * functions/worker-configuration.d.ts is generated from wrangler.toml by `npm run types`; this
 * runs that very command with `--check` (wrangler compares the file with what it would write).
 */
const TYPES_FILE = 'functions/worker-configuration.d.ts';
const command = (JSON.parse(readFileSync(join(PROJECT_ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts.types!;
const args = command.split(' ');
const WRANGLER = join(PROJECT_ROOT, 'node_modules/wrangler/bin/wrangler.js');

function check(file: string) {
  const argv = args.slice(1).map((a) => (a === TYPES_FILE ? file : a));
  return spawnSync(process.execPath, [WRANGLER, ...argv, '--check'], {
    cwd: PROJECT_ROOT,
    encoding: 'utf8',
    env: { ...process.env, WRANGLER_SEND_METRICS: 'false', FORCE_COLOR: '0' },
  });
}

const scratch = mkdtempSync(join(tmpdir(), 'sbt-worker-types-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('npm run types', () => {
  it(`writes the Env half only: the runtime's types come from @cloudflare/workers-types`, () => {
    expect(args.slice(0, 2)).toEqual(['wrangler', 'types']);
    expect(args).toContain(TYPES_FILE);
    expect(args).toContain('--include-runtime=false');
    const text = readFileSync(join(PROJECT_ROOT, TYPES_FILE), 'utf8');
    expect(text).toContain('interface Env extends __BaseEnv_Env {}');
    expect(text).not.toContain('Runtime types generated');
    const tsconfig = readFileSync(join(PROJECT_ROOT, 'functions/tsconfig.json'), 'utf8');
    expect(tsconfig).toContain('"@cloudflare/workers-types"');
  });

  it(`finds ${TYPES_FILE} up to date with wrangler.toml`, () => {
    const run = check(TYPES_FILE);
    expect(run.stdout + run.stderr).toContain('up to date');
    expect(run.status).toBe(0);
  });

  it('fails on a stale file: a binding typed otherwise than wrangler.toml says', () => {
    const stale = join(scratch, 'stale.d.ts');
    copyFileSync(join(PROJECT_ROOT, TYPES_FILE), stale);
    const text = readFileSync(stale, 'utf8');
    expect(text).toContain('POOL: string;');
    writeFileSync(stale, text.replace('POOL: string;', 'POOL: number;'));
    const run = check(stale);
    expect(run.stdout + run.stderr).toContain('out of date');
    expect(run.status).not.toBe(0);
  });
});
