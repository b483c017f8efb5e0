import { beforeAll, describe, expect, it } from 'vitest';
import { claimJobs, completeJob, enqueue, enqueueBatch } from '../../queue/index.ts';
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
    expect(blocks.map((b) => statements(b.text).length)).toEqual([2, 4, 5]);
  });

  it('runs the bulk, dead-letter and replay SQL as shown: a group listed, counted, retried, a job cancelled and one replayed', async () => {
    const bulk = statements(blocks[2]!.text);
    const failed = await db.sql<{ id: string }[]>`
      insert into worker.jobs (type, status, attempts, last_error, started_at, finished_at)
      select 'fail', 'failed', 3, 'sample failure (attempt ' || i || ')', now(), now() from generate_series(1, 3) i returning id`;
    await db.sql`insert into worker.jobs (type, payload, created_at) values ('countdown', '{"n": 1}', '2026-04-30T00:00:00Z')`;
    const [groups] = [await db.sql.unsafe(bulk[0]!)];
    const group = groups.find((g) => g.type === 'fail')!;
    expect(group).toMatchObject({ error: 'sample failure (attempt <n>)', jobs: '3' });
    const withFingerprint = (s: string) => s.replace('"…"', `"${group.fingerprint}"`);
    expect((await db.sql.unsafe(withFingerprint(bulk[1]!)))[0]).toMatchObject({ matched: '3', requeued: 0 });
    expect((await db.sql.unsafe(withFingerprint(bulk[2]!)))[0]).toMatchObject({ matched: '3', requeued: 3, next_after: null });
    expect((await db.sql.unsafe(bulk[3]!))[0]).toMatchObject({ cancelled: 1 });
    await db.sql`update worker.jobs set status = 'failed', finished_at = now() where id = ${failed[0]!.id}`;
    const [replay] = await db.sql.unsafe(bulk[4]!.replace("'…'", `'${failed[0]!.id}'`));
    expect(replay).toMatchObject({ type: 'fail', status: 'queued', payload: { message: 'again' } });
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

describe('the SQL in docs/deploying.md: the operations manual\'s hosts as pool capacities', () => {
  const blocks = fencedBlocks('docs/deploying.md').filter((b) => b.lang === 'sql');

  it('runs as shown, and the pools are what the doc says of them', async () => {
    expect(blocks.map((b) => statements(b.text).length)).toEqual([3]);
    const [configure, window, enable] = statements(blocks[0]!.text);
    await db.sql.unsafe(configure!);
    await db.sql.unsafe(window!);
    const limitAt = async (pool: string, iso: string) => (await db.sql`select worker.pool_limit_at(${pool}, ${iso}::timestamptz) as v`)[0]!.v;
    // 3 playwright workers (6 GB each) day and night
    for (const iso of ['2031-01-01T07:59:59Z', '2031-01-01T08:00:00Z', '2031-01-01T19:59:59Z', '2031-01-01T20:00:00Z']) expect(await limitAt('bms-4', iso)).toBe(18);
    const claim = (pool: string, types: string[]) => claimJobs(db.sql, { workerId: `docs-${pool}`, pool, limit: 10, types });
    // bms-4 runs no heavy job: pinned, it is refused; unpinned, bms-4 leaves it queued
    await expect(enqueue(db.sql, { type: 'countdown', payload: { n: 1 }, pool: 'bms-4', weight: 'heavy' })).rejects.toMatchObject({ field: 'weight' });
    await enqueue(db.sql, { type: 'countdown', payload: { n: 1 }, weight: 'heavy' });
    await enqueueBatch(db.sql, Array.from({ length: 4 }, () => ({ type: 'countdown', payload: { n: 1 }, pool: 'bms-4', weight: 'playwright' })));
    const taken = await claim('bms-4', ['countdown']);
    expect(taken.map((j) => j.weight)).toEqual(['playwright', 'playwright', 'playwright']);
    // vps-i1 is off until enabled, and runs light jobs only
    await enqueue(db.sql, { type: 'countdown', payload: { n: 1 }, pool: 'vps-i1' });
    expect(await claim('vps-i1', ['countdown'])).toHaveLength(0);
    await db.sql.unsafe(enable!);
    expect((await claim('vps-i1', ['countdown'])).map((j) => [j.pool, j.weight])).toEqual([['vps-i1', 'light']]);
  });
});
