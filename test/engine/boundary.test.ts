import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

// The engine's boundary: one driver (queue/driver/, with the migrations) is the only code that
// names the worker.* schema. The rest of the engine, the Worker (functions/) and the tools
// (scripts/, bench/, sandbox/) call the engine's typed functions instead, so a change to the
// storage is a change to queue/driver/ alone. SQL is written in postgres.js tagged templates, so
// the check reads the text of every template literal (comments and plain strings are not SQL)
// and fails on a schema-qualified name in one, naming file:line. Tests may poke the database.

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/**
 * Files allowed to hold SQL on worker.* while their move into the driver is under way, each with
 * its reason. Empty: every such move is done. An entry must still match (a stale one fails
 * below), so the list only shrinks.
 */
const ALLOWLIST = new Map<string, string>([]);

/** Where the check looks: every source outside the driver (its home) and the tests. */
const CHECKED_DIRS = ['queue', 'functions', 'scripts', 'bench', 'sandbox'];
const DRIVER_DIR = 'queue/driver/';

/**
 * A schema-qualified name in worker.*: `worker.` and a lower-case identifier, not followed by
 * another dot or a letter-led path (so a host such as worker.example.com, or a file such as
 * worker.yaml in a message, is not SQL).
 */
const WORKER_NAME = /\bworker\.[a-z_][a-z0-9_]*\b(?![.\w])/;
const NOT_SQL = /\bworker\.(ya?ml|json|toml|js|ts|txt|log)\b/;

/** Every `worker.` name inside a template literal of `source`, with its 1-based line. */
export function workerNamesInTemplates(fileName: string, source: string): { line: number; text: string }[] {
  const file = ts.createSourceFile(fileName, source, ts.ScriptTarget.Latest, true, fileName.endsWith('.tsx') ? ts.ScriptKind.TSX : ts.ScriptKind.TS);
  const found: { line: number; text: string }[] = [];
  const visit = (node: ts.Node): void => {
    if (
      ts.isNoSubstitutionTemplateLiteral(node) || ts.isTemplateHead(node) || ts.isTemplateMiddle(node) || ts.isTemplateTail(node)
    ) {
      // the raw text as written, line by line, so the line reported is the line of the name
      const start = node.getStart(file);
      const raw = source.slice(start, node.getEnd());
      raw.split('\n').forEach((text, i) => {
        const match = WORKER_NAME.exec(text);
        if (match && !NOT_SQL.test(match[0])) found.push({ line: file.getLineAndCharacterOfPosition(start).line + 1 + i, text: text.trim() });
      });
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return found;
}

function sourceFiles(dir: string): string[] {
  const files: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.isDirectory()) files.push(...sourceFiles(join(dir, entry.name)));
    else if (/\.tsx?$/.test(entry.name) && !entry.name.endsWith('.d.ts')) files.push(join(dir, entry.name));
  }
  return files;
}

describe('engine boundary', () => {
  it('finds worker.* names in template literals only, with their lines', () => {
    const source = [
      '// a comment naming worker.jobs is not SQL',
      "const s = 'worker.jobs in a plain string';",
      'await sql`select * from worker.jobs',
      '          join worker.job_history e on true`;',
      'const q = `update ${sql`worker.alerts`} set x = 1`;',
      'const u = `see https://worker.example.com/x and worker.yaml`;',
      'const t = (<div>{`from worker.schedules`}</div>);',
    ].join('\n');
    expect(workerNamesInTemplates('a.tsx', source).map((f) => f.line)).toEqual([3, 4, 5, 7]);
  });

  it('no file outside the engine\'s driver names worker.* in SQL (the engine owns its database)', () => {
    const violations: string[] = [];
    const allowedSeen = new Set<string>();
    for (const dir of CHECKED_DIRS) expect(sourceFiles(join(root, dir)).length, dir).toBeGreaterThan(0);
    const files = CHECKED_DIRS.flatMap((dir) => sourceFiles(join(root, dir)));
    for (const file of files) {
      const repoPath = relative(root, file).split(sep).join('/');
      if (repoPath.startsWith(DRIVER_DIR) || /\.test\.tsx?$/.test(repoPath)) continue;
      const found = workerNamesInTemplates(file, readFileSync(file, 'utf8'));
      if (found.length === 0) continue;
      if (ALLOWLIST.has(repoPath)) {
        allowedSeen.add(repoPath);
        continue;
      }
      for (const f of found) violations.push(`${repoPath}:${f.line}: ${f.text}`);
    }
    expect(violations, 'SQL naming worker.* outside queue/driver/: move the statement into the driver and call it').toEqual([]);
    const stale = [...ALLOWLIST.keys()].filter((path) => !allowedSeen.has(path));
    expect(stale, 'these allowlisted files no longer name worker.* in SQL: remove them from ALLOWLIST').toEqual([]);
  });
});
