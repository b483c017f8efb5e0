import { readFileSync, readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { LIFECYCLE, lifecycleTable, lockOrderList } from '../../queue/lifecycle.ts';

/**
 * The lifecycle has one home (queue/lifecycle.ts): every statement that writes a job's status
 * lives in a file the list names, and the docs show the list as it is.
 */

const ROOT = join(import.meta.dirname, '..', '..');
const SOURCES = ['migrations/functions', 'queue', 'functions', 'scripts'];

function files(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && /\.(ts|tsx|sql)$/.test(e.name))
    .map((e) => relative(ROOT, join(e.parentPath, e.name)));
}

/** Statements that write worker.jobs.status: an insert of a job row, or an update whose SET names status. */
function statusWrites(text: string): number {
  let n = (text.match(/insert\s+into\s+worker\.jobs\b/gi) ?? []).length;
  for (const m of text.matchAll(/update\s+worker\.jobs\b([\s\S]*?)(?:\bwhere\b|\breturning\b|\bfrom\b|;|`|\$function\$)/gi)) {
    if (/(^|[\s,])status\s*=/i.test(m[1]!)) n++;
  }
  return n;
}

describe('the lifecycle', () => {
  const writers = new Map(SOURCES.flatMap(files).map((f) => [f, statusWrites(readFileSync(join(ROOT, f), 'utf8'))] as const).filter(([, n]) => n > 0));
  const homes = new Set(LIFECYCLE.map((t) => t.home));

  it('finds the statements it looks for', () => {
    expect(statusWrites('update worker.jobs j\n   set status = \'done\', x = 1 where id = 1')).toBe(1);
    expect(statusWrites('update worker.jobs set run_at = now() where status = \'queued\'')).toBe(0);
    expect(statusWrites('insert into worker.jobs (type) values (1)')).toBe(1);
  });

  it('names the home of every statement that writes a job\'s status', () => {
    expect([...writers.keys()].filter((f) => !homes.has(f))).toEqual([]);
  });

  it('names no home that writes no status', () => {
    expect([...homes].filter((h) => !writers.has(h))).toEqual([]);
  });

  it('is shown in docs/engine.md as it is', () => {
    const docs = readFileSync(join(ROOT, 'docs/engine.md'), 'utf8');
    expect(docs).toContain(lifecycleTable());
    expect(docs).toContain(lockOrderList());
  });
});
