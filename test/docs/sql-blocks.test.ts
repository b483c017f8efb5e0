import { beforeAll, describe, expect, it } from 'vitest';
import { claimJobs, completeJob } from '../../queue/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { fencedBlocks } from './doc-blocks.ts';

/**
 * The SQL docs/engine.md shows a reader (enqueue from SQL, the quick checks) runs as shown against
 * a migrated database: `'…'` stands for a job id, `, …` for more of the same. The history query
 * reads a job's whole history, the events its row holds included.
 */
let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});

const statements = (text: string) =>
  text.split(/;\s*(?:--[^\n]*)?\n/).map((s) => s.replace(/^\s*--[^\n]*\n/gm, '').trim()).filter((s) => s.length > 0);

describe('the SQL in docs/engine.md', () => {
  const blocks = fencedBlocks('docs/engine.md').filter((b) => b.lang === 'sql');

  it('is there to run: the SQL enqueue and the quick checks', () => {
    expect(blocks.map((b) => statements(b.text).length)).toEqual([2, 4]);
  });

  it('runs as shown, and the history query returns the job history the API shows', async () => {
    const [enqueueBlock, quickChecks] = blocks;
    for (const statement of statements(enqueueBlock!.text)) await db.sql.unsafe(statement.replace(', …]', ']'));
    const [job] = await claimJobs(db.sql, { workerId: 'docs', limit: 1, types: ['uppercase'] });
    expect(await completeJob(db.sql, job!, { text: 'HI' })).toBe(true);
    const answers = [];
    for (const statement of statements(quickChecks!.text)) answers.push(await db.sql.unsafe(statement.replace("'…'", `'${job!.id}'`)));
    const history = answers.at(-1)!;
    expect(history.map((e) => e.kind)).toEqual(['enqueued', 'claimed', 'done']);
    expect(history.every((e) => e.job_id === job!.id)).toBe(true);
  });
});
