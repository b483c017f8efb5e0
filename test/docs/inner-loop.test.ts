import { execFileSync, spawnSync } from 'node:child_process';
import { appendFileSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../scripts/lib/cli.ts';
import { inPostgresMatrix } from '../../scripts/lib/test-matrix.ts';
import { fencedBlocks } from './doc-blocks.ts';

/**
 * docs/engine.md's inner loop: each command selects the files its comment says. Each is run here
 * as `vitest list` with the same arguments and the same environment as the npm script (which
 * lists the files a run would take, without running them).
 */
const VITEST = join(PROJECT_ROOT, 'node_modules/vitest/vitest.mjs');
const scripts = (JSON.parse(readFileSync(join(PROJECT_ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
const scratch: string[] = [];
afterAll(() => scratch.forEach((d) => rmSync(d, { recursive: true, force: true })));

/** `npm test -- ARGS` or `npm run SCRIPT [-- ARGS]` as the script's env and vitest's arguments. */
function resolve(line: string): { env: Record<string, string>; args: string[] } {
  const [npmPart, args = ''] = line.split(' -- ');
  const script = npmPart!.trim() === 'npm test' ? 'test' : npmPart!.trim().replace(/^npm run /, '');
  const command = scripts[script];
  if (!command) throw new Error(`no npm script ${script}`);
  const env: Record<string, string> = {};
  const words = command.split(' ');
  while (/^[A-Z0-9_]+=/.test(words[0]!)) {
    const [name, value] = words.shift()!.split(/=(.*)/s) as [string, string];
    env[name] = value.replace(/\$\{[A-Z0-9_]+:-([^}]*)\}/g, '$1');
  }
  expect(words).toEqual(['vitest', 'run']);
  return { env, args: args.split(' ').filter(Boolean) };
}

/** The files `vitest list` selects for `line`, relative to `root`. */
function listed(line: string, root = PROJECT_ROOT): string[] {
  const { env, args } = resolve(line);
  // (--json takes an optional file: given a bare `--json` a file argument after it is overwritten)
  const out = join(mkdtempSync(join(tmpdir(), 'sbt-list-')), 'files.json');
  scratch.push(dirname(out));
  const run = spawnSync(process.execPath, [VITEST, 'list', '--filesOnly', `--json=${out}`, ...args], {
    cwd: root,
    encoding: 'utf8',
    env: { ...process.env, STARBASE_TEST_MATRIX: '', ...env },
  });
  expect(run.status, run.stderr).toBe(0);
  const files = (JSON.parse(readFileSync(out, 'utf8')) as Array<{ file: string }>).map((f) => relative(root, f.file));
  return [...new Set(files)].sort();
}

const allFiles = (root = PROJECT_ROOT) =>
  execFileSync('git', ['-C', root, 'ls-files', 'test'], { encoding: 'utf8' }).split('\n').filter((f) => f.endsWith('.test.ts')).sort();
const marked = () => allFiles().filter((f) => inPostgresMatrix(readFileSync(join(PROJECT_ROOT, f), 'utf8')));

const CASES: Record<string, () => void> = {
  'npm test -- test/engine/lease.test.ts': () => {
    expect(listed('npm test -- test/engine/lease.test.ts')).toEqual(['test/engine/lease.test.ts']);
  },
  'npm test -- --project engine': () => {
    expect(listed('npm test -- --project engine')).toEqual(allFiles().filter((f) => /^test\/(engine|jobs|scripts)\//.test(f)));
  },
  'npm test -- --changed': () => {
    // in a clone where one engine module changed: its tests, not a file that never imports it
    const clone = mkdtempSync(join(tmpdir(), 'sbt-changed-'));
    scratch.push(clone);
    execFileSync('git', ['clone', '-q', PROJECT_ROOT, clone]);
    symlinkSync(join(PROJECT_ROOT, 'node_modules'), join(clone, 'node_modules'));
    appendFileSync(join(clone, 'queue/driver/leader.ts'), '\n// changed\n');
    const files = listed('npm test -- --changed', clone);
    expect(files).toContain('test/engine/leader.test.ts');
    expect(files).not.toContain('test/scripts/worker-types.test.ts');
    expect(files.length).toBeLessThan(allFiles(clone).length);
  },
  'npm run test:pg18 -- test/engine/lease.test.ts': () => {
    expect(listed('npm run test:pg18 -- test/engine/lease.test.ts')).toEqual(['test/engine/lease.test.ts']);
    // a file without the mark is not in the matrix
    expect(listed('npm run test:pg18 -- test/engine/manual.test.ts')).toEqual([]);
  },
  'npm run test:pg15': () => {
    const files = listed('npm run test:pg15');
    expect(files).toEqual(marked());
    expect(listed('npm run test:pg18')).toEqual(files);
    // the concurrency core is in it
    for (const core of ['model', 'chaos', 'claim-keys', 'lease', 'flow-control', 'signals', 'children', 'bulk', 'deadlines', 'migrate']) {
      expect(files).toContain(`test/engine/${core}.test.ts`);
    }
    expect(files.length).toBeLessThan(allFiles().length / 2);
  },
};

describe("docs/engine.md's inner loop", () => {
  const block = fencedBlocks('docs/engine.md', PROJECT_ROOT).find((b) => b.lang === 'sh' && b.text.includes('npm test -- --project'));
  const lines = (block?.text ?? '').split('\n').map((l) => l.replace(/#.*/, '').trim()).filter(Boolean);

  it('shows exactly the commands checked here', () => {
    expect(lines).toEqual(Object.keys(CASES));
  });

  for (const [line, check] of Object.entries(CASES)) {
    it(`${line}: selects what its comment says`, check, 30_000);
  }
});
