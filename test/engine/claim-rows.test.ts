// Postgres matrix: the claim (the rows it writes).
import { beforeAll, describe, expect, it } from 'vitest';
import { CLAIM_ONLY_COLUMNS, CLAIMED_COLUMNS, ROW_HELD_EVENT_COLUMNS, enqueue, getJob, settleAndClaim } from '../../queue/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});

describe('settle_and_claim rows', () => {
  it('names every column of worker.jobs in table order, but for the history ids the row holds', async () => {
    const columns = (await db.sql`
      select attname from pg_attribute where attrelid = 'worker.jobs'::regclass and attnum > 0 and not attisdropped order by attnum`)
      .map((c) => c.attname as string);
    const held: readonly string[] = ROW_HELD_EVENT_COLUMNS;
    const claimOnly: readonly string[] = CLAIM_ONLY_COLUMNS;
    expect(columns.filter((c) => !held.includes(c) && !claimOnly.includes(c))).toEqual([...CLAIMED_COLUMNS]);
    expect(columns.filter((c) => claimOnly.includes(c))).toEqual([...CLAIM_ONLY_COLUMNS]);
    expect(columns.filter((c) => held.includes(c))).toEqual([...ROW_HELD_EVENT_COLUMNS]);
  });

  it('hands the runner the same job the table holds, field for field', async () => {
    const { job: queued } = await enqueue(db.sql, {
      type: 'uppercase',
      payload: { text: 'claim me', nested: { list: [1, 'two', null], quote: 'a "b" \\ c' } },
      priority: 7,
      maxAttempts: 5,
      dedupeKey: 'claim-rows:dedupe',
      submitKey: 'claim-rows:submit',
      pool: 'claim-rows-pool',
      weight: 'heavy',
      concurrencyKey: 'claim-rows:key',
      concurrencyLimit: 2,
      deadlineMs: 3_600_000,
      deadlineSeverity: 'critical',
    });
    expect(queued.deadlineSeverity).toBe('critical');
    const { jobs } = await settleAndClaim(db.sql, [], { workerId: 'claim-rows-runner', pool: 'claim-rows-pool', limit: 10 });
    expect(jobs.map((j) => j.id)).toEqual([queued.id]);
    const stored = (await getJob(db.sql, queued.id))!.job;
    expect(stored.status).toBe('running');
    expect(jobs[0]).toEqual(stored);
  });
});
