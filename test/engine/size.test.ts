import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

// Product code (the engine, queue/, and the Worker, functions/) stays in pieces a reader can hold:
// no file over 300 lines, no function over 80. A piece that must be longer says why in a comment
// right above it that starts `Long because`; the check then lets it be.

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const MAX_FILE_LINES = 300;
export const MAX_FUNCTION_LINES = 80;
const REASON = /\bLong because\b/;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return /\.tsx?$/.test(entry.name) && !entry.name.endsWith('.d.ts') ? [path] : [];
  });
}

/** Every function (declaration, method, arrow, expression) in `source` longer than `max` lines with no reason above it. */
export function longFunctions(fileName: string, source: string, max = MAX_FUNCTION_LINES): { line: number; lines: number; name: string }[] {
  const file = ts.createSourceFile(fileName, source, ts.ScriptTarget.Latest, true, fileName.endsWith('.tsx') ? ts.ScriptKind.TSX : ts.ScriptKind.TS);
  const found: { line: number; lines: number; name: string }[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body) {
      const start = file.getLineAndCharacterOfPosition(node.getStart(file)).line;
      const lines = file.getLineAndCharacterOfPosition(node.getEnd()).line - start + 1;
      // the comment may sit above the function or above the statement that holds it (`const f = () => …`)
      let holder: ts.Node = node;
      while (holder.parent && !ts.isSourceFile(holder.parent) && !ts.isBlock(holder.parent) && !ts.isClassLike(holder.parent)) holder = holder.parent;
      const comments = ts.getLeadingCommentRanges(source, holder.getFullStart()) ?? [];
      const reasoned = comments.some((c) => REASON.test(source.slice(c.pos, c.end)));
      if (lines > max && !reasoned) found.push({ line: start + 1, lines, name: ts.getNameOfDeclaration(node as ts.Declaration)?.getText(file) ?? '(anonymous)' });
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return found;
}

describe('product code in pieces a reader can hold', () => {
  const files = [...sourceFiles(join(root, 'queue')), ...sourceFiles(join(root, 'functions'))];
  const read = (file: string) => ({ path: relative(root, file).split(sep).join('/'), source: readFileSync(file, 'utf8') });

  it('finds long functions, and lets one with its reason be', () => {
    const body = Array.from({ length: 5 }, (_, i) => `  const v${i} = ${i};`).join('\n');
    const source = [
      `function long() {\n${body}\n}`,
      `// Long because the cases read best side by side\nfunction reasoned() {\n${body}\n}`,
      `const arrow = () => {\n${body}\n};`,
      `function short() {\n  return 1;\n}`,
    ].join('\n');
    expect(longFunctions('a.ts', source, 5).map((f) => f.name)).toEqual(['long', 'arrow']);
  });

  it(`no file over ${MAX_FILE_LINES} lines`, () => {
    expect(files.length).toBeGreaterThan(50);
    const long = files.map(read).filter((f) => f.source.split('\n').length > MAX_FILE_LINES && !REASON.test(f.source.slice(0, 600)));
    expect(long.map((f) => `${f.path}: ${f.source.split('\n').length} lines`)).toEqual([]);
  });

  it(`no function over ${MAX_FUNCTION_LINES} lines without a reason`, () => {
    const long = files.map(read).flatMap((f) => longFunctions(f.path, f.source).map((l) => `${f.path}:${l.line} ${l.name}: ${l.lines} lines`));
    expect(long).toEqual([]);
  });
});
