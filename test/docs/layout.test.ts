import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * The README's layout is the tree: every path it names exists, and every directory under queue/ and
 * functions/ (two levels down) is named. A move under way is listed, an entry to delete when it lands
 * (none is now): an entry that is no longer true fails, so the lists cannot go stale.
 */
const NAMED_NOT_YET_THERE = new Set<string>([]);
const THERE_NOT_YET_NAMED = new Set<string>([]);

/** The paths the README's layout block names, each with its parents (`functions/http/routes/`). */
function layoutPaths(readme: string): string[] {
  const block = /## Layout\n+```\n([\s\S]*?)```/.exec(readme)?.[1];
  if (!block) throw new Error('README.md has no layout block under "## Layout"');
  const paths: string[] = [];
  const parents: string[] = [];
  for (const line of block.split('\n')) {
    if (line.trim() === '') continue;
    const depth = (line.length - line.trimStart().length) / 2;
    const names = line.trim().split(/\s{3,}/)[0]!.split(/\s{2}/);
    parents.length = depth;
    for (const name of names) paths.push(parents.join('') + name);
    parents[depth] = names.length === 1 ? names[0]! : '';
  }
  return paths;
}

function directories(root: string, levels: number): string[] {
  if (levels === 0) return [];
  return readdirSync(root, { withFileTypes: true })
    .filter((e) => e.isDirectory())
    .flatMap((e) => {
      const path = `${root}/${e.name}`;
      return [`${path}/`, ...directories(path, levels - 1)];
    });
}

const named = layoutPaths(readFileSync('README.md', 'utf8'));

describe("the README's layout", () => {
  it('parses into the paths it names', () => {
    expect(named).toContain('functions/http/routes/');
    expect(named).toContain('functions/platform/billing/');
    expect(named).toContain('queue/index.ts');
  });

  it('names only paths that exist', () => {
    const missing = named.filter((p) => !existsSync(join('.', p)) && !NAMED_NOT_YET_THERE.has(p));
    expect(missing).toEqual([]);
    expect([...NAMED_NOT_YET_THERE].filter((p) => existsSync(p) || !named.includes(p)), 'landed: delete the entry').toEqual([]);
  });

  it('names every directory under queue/ and functions/', () => {
    const present = [...directories('queue', 2), ...directories('functions', 2)];
    expect(present.filter((d) => !named.includes(d) && !THERE_NOT_YET_NAMED.has(d))).toEqual([]);
    expect([...THERE_NOT_YET_NAMED].filter((d) => !present.includes(d) || named.includes(d)), 'landed: delete the entry').toEqual([]);
  });
});
