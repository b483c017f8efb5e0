import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { previousRelease, releaseBefore } from '../support/previous-release.ts';

/** The migration tests' previous releases come from the repository's history (no copies kept). */
const ROOT = new URL('../../', import.meta.url).pathname;
const git = (...args: string[]) => execFileSync('git', ['-C', ROOT, ...args], { encoding: 'utf8' }).trim();
const scratch: string[] = [];
afterAll(() => scratch.forEach((d) => rmSync(d, { recursive: true, force: true })));

describe('the release before a migration', () => {
  it('is the commit on main just before the one that brought the migration in', () => {
    const before = releaseBefore('0240');
    const tree = (rev: string) => git('ls-tree', '--name-only', `${rev}:migrations`).split('\n');
    expect(tree(before)).toContain('0230_dashboard.sql');
    expect(tree(before).filter((f) => f.startsWith('0240_'))).toEqual([]);
    // the next commit on main's first-parent line has it: no release lies between
    const next = git('rev-list', '--first-parent', '--reverse', `${before}..HEAD`).split('\n')[0]!;
    expect(tree(next).filter((f) => f.startsWith('0240_'))).toHaveLength(1);
    expect(git('rev-parse', `${next}^1`)).toBe(before);
  });

  it("is laid out as that commit's migrations/, functions as they were then", () => {
    const dir = previousRelease('0170');
    expect(readdirSync(dir)).toContain('0160_row_held_history.sql');
    expect(readdirSync(dir).filter((f) => f.startsWith('0170_'))).toEqual([]);
    const rev = releaseBefore('0170');
    const functions = git('ls-tree', '--name-only', `${rev}:migrations/functions`).split('\n');
    expect(readdirSync(join(dir, 'functions')).sort()).toEqual(functions.sort());
  });

  it('refuses with a clear error in a shallow clone, which has no history to build it from', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sbt-shallow-'));
    scratch.push(dir);
    execFileSync('git', ['clone', '-q', '--depth', '1', `file://${ROOT}`, dir]);
    expect(() => releaseBefore('0240', dir)).toThrow(/release before 0240 from git history.*shallow clone/);
  });
});
