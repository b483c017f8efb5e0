import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, posix, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// The walls of the tree, checked over every import specifier (static, re-export, side-effect and
// dynamic, type-only included): the engine (queue/) runs in Node and in workerd, so it knows
// nothing of the Worker, of Hono or of Cloudflare; the Worker (functions/) is product code, so it
// never reaches into the tools (sandbox/, scripts/, bench/); and test helpers are for tests only.
// Tests may import anything, tools may import the product.

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const skippedDirs = new Set(['node_modules', '.git', '.wrangler', 'test-artifacts', 'dist', 'coverage']);

/** Every module specifier in a TypeScript source: `from '…'`, `import '…'`, `import('…')`. */
function importSpecifiers(source: string): string[] {
  const found: string[] = [];
  const pattern = /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)(['"])([^'"\r\n]+)\1/g;
  for (const match of source.matchAll(pattern)) found.push(match[2]!);
  return found;
}

function sourceFiles(dir: string): string[] {
  const files: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.isDirectory()) {
      if (!skippedDirs.has(entry.name)) files.push(...sourceFiles(join(dir, entry.name)));
    } else if (/\.tsx?$/.test(entry.name) && !entry.name.endsWith('.d.ts')) {
      files.push(join(dir, entry.name));
    }
  }
  return files;
}

const topOf = (repoPath: string): string => repoPath.split('/')[0]!;

/** The rule a file's import breaks, or null. `file` is repo-relative with forward slashes. */
function layoutViolation(file: string, specifier: string): string | null {
  const from = topOf(file);
  if (specifier.startsWith('.')) {
    const target = posix.normalize(posix.join(posix.dirname(file), specifier));
    const to = topOf(target);
    if (from === 'queue' && ['functions', 'sandbox', 'scripts', 'bench', 'test'].includes(to)) {
      return `the engine (queue/) must not import ${to}/ (${target})`;
    }
    if (from === 'functions' && ['sandbox', 'scripts', 'bench', 'test'].includes(to)) {
      return `the Worker (functions/) must not import the ${to}/ tree (${target})`;
    }
    if (from !== 'test' && to === 'test') return `only tests may import test/ (${target})`;
    return null;
  }
  if (from === 'queue' && (specifier === 'hono' || specifier.startsWith('hono/') || specifier.startsWith('cloudflare:') || specifier.startsWith('@cloudflare/'))) {
    return `the engine (queue/) must not depend on ${specifier}: it runs in Node too`;
  }
  return null;
}

describe('tree layout', () => {
  it('finds every kind of import specifier', () => {
    const source = [
      "import { a } from './a.ts';",
      "import type { B } from '../b.ts';",
      'import {\n  c,\n  d,\n} from "./c.ts";',
      "export * from './e.ts';",
      "export { f } from './f.ts';",
      "import './side-effect.ts';",
      "const g = await import('./g.ts');",
      "type H = import('../h.ts').H;",
    ].join('\n');
    expect(importSpecifiers(source)).toEqual(['./a.ts', '../b.ts', './c.ts', './e.ts', './f.ts', './side-effect.ts', './g.ts', '../h.ts']);
  });

  it('names the rule each forbidden import breaks', () => {
    expect(layoutViolation('queue/a.ts', '../functions/x.ts')).toMatch(/queue.*functions/);
    expect(layoutViolation('queue/sub/a.ts', '../../test/support/db.ts')).toMatch(/queue.*test/);
    expect(layoutViolation('queue/a.ts', 'hono')).toMatch(/hono/);
    expect(layoutViolation('queue/a.ts', 'hono/jsx')).toMatch(/hono/);
    expect(layoutViolation('queue/a.ts', 'cloudflare:sockets')).toMatch(/cloudflare/);
    expect(layoutViolation('queue/a.ts', '@cloudflare/workers-types')).toMatch(/cloudflare/);
    expect(layoutViolation('functions/http/a.ts', '../../sandbox/server.ts')).toMatch(/functions.*sandbox/);
    expect(layoutViolation('functions/a.ts', '../bench/stats.ts')).toMatch(/functions.*bench/);
    expect(layoutViolation('functions/a.ts', '../scripts/lib/cli.ts')).toMatch(/functions.*scripts/);
    expect(layoutViolation('scripts/soak.ts', '../test/support/history.ts')).toMatch(/only tests/);
    expect(layoutViolation('vitest.config.ts', './test/support/global-setup.ts')).toMatch(/only tests/);
    // Allowed directions.
    expect(layoutViolation('functions/a.ts', '../queue/index.ts')).toBeNull();
    expect(layoutViolation('functions/a.ts', 'hono')).toBeNull();
    expect(layoutViolation('scripts/soak.ts', '../queue/db.ts')).toBeNull();
    expect(layoutViolation('scripts/soak.ts', '../bench/stats.ts')).toBeNull();
    expect(layoutViolation('test/engine/a.test.ts', '../../scripts/lib/history.ts')).toBeNull();
    expect(layoutViolation('test/worker/a.test.ts', '../../sandbox/server.ts')).toBeNull();
    expect(layoutViolation('queue/a.ts', './db.ts')).toBeNull();
  });

  it('no file imports across a wall', () => {
    const files = sourceFiles(root);
    const repoPaths = files.map((file) => relative(root, file).split(sep).join('/'));
    // The walk must reach the trees the rules are about, or the check below proves nothing.
    for (const top of ['queue', 'functions', 'scripts', 'bench', 'sandbox', 'test']) {
      expect(repoPaths.some((path) => topOf(path) === top), `no .ts file found under ${top}/`).toBe(true);
    }
    const violations: string[] = [];
    for (const [index, file] of files.entries()) {
      const repoPath = repoPaths[index]!;
      for (const specifier of importSpecifiers(readFileSync(file, 'utf8'))) {
        const rule = layoutViolation(repoPath, specifier);
        if (rule) violations.push(`${repoPath} imports '${specifier}': ${rule}`);
      }
    }
    expect(violations).toEqual([]);
  });
});
