import { beforeAll, describe, expect, it } from 'vitest';
import { ConflictError, enqueue, enqueueBatch, getJob, ValidationError, type EnqueueInput, type Sql } from '../../queue/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});

async function count(sql: Sql, where = sql`true`): Promise<number> {
  const [row] = await sql`select count(*)::int as n from worker.jobs where ${where}`;
  return row!.n as number;
}

describe('enqueue', () => {
  it('enqueues a batch of 1000 in one statement, all or nothing', async () => {
    const before = await count(db.sql);
    const results = await enqueueBatch(db.sql, Array.from({ length: 1000 }, (_, i) => ({ type: 'uppercase', payload: { text: `b${i}` }, priority: 100 })));
    expect(results).toHaveLength(1000);
    expect(results[999]!.job.payload).toEqual({ text: 'b999' });
    expect(await count(db.sql)).toBe(before + 1000);

    const bad: EnqueueInput[] = [{ type: 'uppercase', payload: { text: 'ok' } }, { type: 'nope', payload: {} }];
    await expect(enqueueBatch(db.sql, bad)).rejects.toMatchObject({ name: 'ValidationError', field: 'jobs[1].type' });
    expect(await count(db.sql)).toBe(before + 1000);
  });

  it('gives jobs UUIDv7 ids: version 7, the enqueue time in the first 48 bits, later jobs sort after earlier ones', async () => {
    const before = Date.now();
    const first = await enqueue(db.sql, { type: 'uppercase', payload: { text: 'v7-a' } });
    const batch = await enqueueBatch(db.sql, [{ type: 'uppercase', payload: { text: 'v7-b' } }, { type: 'uppercase', payload: { text: 'v7-c' } }]);
    const [sqlJob] = await db.sql`select id from worker.enqueue_job(type => 'uppercase', payload => '{"text":"v7-d"}')`;
    const after = Date.now();
    const ids = [first.job.id, ...batch.map((b) => b.job.id), sqlJob!.id as string];
    const millis = ids.map((id) => parseInt(id.replaceAll('-', '').slice(0, 12), 16));
    for (const id of ids) expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    // the database's clock and ours are the same machine's; a few ms of slack for rounding
    for (const ms of millis) {
      expect(ms).toBeGreaterThanOrEqual(before - 5);
      expect(ms).toBeLessThanOrEqual(after + 5);
    }
    // statements one after another never go back in time (within one millisecond the order is random)
    expect([...millis].sort((a, b) => a - b)).toEqual(millis);
  });

  it('enqueues inside the caller transaction: a rollback leaves no job', async () => {
    const before = await count(db.sql);
    await expect(
      db.sql.begin(async (tx) => {
        await enqueue(tx, { type: 'uppercase', payload: { text: 'tx' } });
        throw new Error('caller aborts');
      }),
    ).rejects.toThrow('caller aborts');
    expect(await count(db.sql)).toBe(before);
    await db.sql.begin(async (tx) => {
      await enqueue(tx, { type: 'uppercase', payload: { text: 'tx-commit' } });
    });
    expect(await count(db.sql)).toBe(before + 1);
  });

  it('enqueues from plain SQL with named arguments, returning the row', async () => {
    const [row] = await db.sql`
      select * from worker.enqueue_job(type => 'uppercase', payload => '{"text":"from sql"}'::jsonb, priority => 10,
                                       max_attempts => 5, submit_key => 'sql-1')`;
    expect(row).toMatchObject({ type: 'uppercase', status: 'queued', priority: 10, max_attempts: 5, submit_key: 'sql-1' });
    const [again] = await db.sql`select id from worker.enqueue_job(type => 'uppercase', payload => '{"text":"from sql"}'::jsonb, priority => 10, max_attempts => 5, submit_key => 'sql-1')`;
    expect(again!.id).toBe(row!.id);
    const before = await count(db.sql);
    const [plain] = await db.sql`select * from worker.enqueue_job(type => 'uppercase', payload => '{"text":"once"}'::jsonb)`;
    expect(await count(db.sql)).toBe(before + 1);
    const events = await db.sql`select kind from worker.job_history where job_id = ${plain!.id}`;
    expect(events.map((e) => e.kind)).toEqual(['enqueued']);
  });

  describe('submit_key', () => {
    it('returns the existing job for the same request', async () => {
      const first = await enqueue(db.sql, { type: 'uppercase', payload: { text: 'once' }, submitKey: 'sk-same' });
      const second = await enqueue(db.sql, { type: 'uppercase', payload: { text: 'once' }, submitKey: 'sk-same', delayMs: 500 });
      expect(first.duplicate).toBe(false);
      expect(second).toMatchObject({ duplicate: true, job: { id: first.job.id } });
      expect(await count(db.sql, db.sql`submit_key = 'sk-same'`)).toBe(1);
    });

    it('refuses the same key with a different request, naming it, and writes nothing', async () => {
      const first = await enqueue(db.sql, { type: 'uppercase', payload: { text: 'a' }, submitKey: 'sk-diff' });
      const before = await count(db.sql);
      const error = await enqueue(db.sql, { type: 'uppercase', payload: { text: 'b' }, submitKey: 'sk-diff' }).catch((e) => e);
      expect(error).toBeInstanceOf(ConflictError);
      expect(error.message).toContain('sk-diff');
      expect(error.message).toContain(first.job.id);
      expect(await count(db.sql)).toBe(before);
    });

    it('gives one job to 20 concurrent identical submits', async () => {
      const sqls = Array.from({ length: 4 }, () => db.client(5));
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) => enqueue(sqls[i % 4]!, { type: 'uppercase', payload: { text: 'race' }, submitKey: 'sk-race' })),
      );
      expect(new Set(results.map((r) => r.job.id)).size).toBe(1);
      expect(results.filter((r) => !r.duplicate)).toHaveLength(1);
    });
  });

  describe('dedupe_key (debounce)', () => {
    it('supersedes the waiting job, recording by which job, and runs the new one after the debounce', async () => {
      const now = new Date('2026-11-30T12:00:00Z');
      const a = await enqueue(db.sql, { type: 'uppercase', payload: { text: 'push 1' }, dedupeKey: 'deploy:svc:main', delayMs: 5000 }, { now });
      const b = await enqueue(db.sql, { type: 'uppercase', payload: { text: 'push 2' }, dedupeKey: 'deploy:svc:main', delayMs: 5000 }, { now: new Date(now.getTime() + 1000) });
      expect(b.superseded).toBe(a.job.id);
      expect(b.job.runAt.toISOString()).toBe('2026-11-30T12:00:06.000Z');
      const old = await getJob(db.sql, a.job.id);
      expect(old!.job).toMatchObject({ status: 'cancelled', supersededBy: b.job.id });
      expect(old!.job.lastError).toContain(b.job.id);
      expect(old!.events.at(-1)).toMatchObject({ kind: 'superseded', detail: { by: b.job.id } });
    });

    it('leaves exactly one queued job after 50 concurrent pushes', async () => {
      const sqls = Array.from({ length: 5 }, () => db.client(10));
      const results = await Promise.all(
        Array.from({ length: 50 }, (_, i) => enqueue(sqls[i % 5]!, { type: 'uppercase', payload: { text: `p${i}` }, dedupeKey: 'deploy:race:main' })),
      );
      expect(new Set(results.map((r) => r.job.id)).size).toBe(50);
      expect(await count(db.sql, db.sql`dedupe_key = 'deploy:race:main' and status = 'queued'`)).toBe(1);
      expect(await count(db.sql, db.sql`dedupe_key = 'deploy:race:main' and status = 'cancelled' and superseded_by is not null`)).toBe(49);
    });
  });

  describe('bad input', () => {
    const cases: Array<[string, Parameters<typeof enqueue>[1], string, RegExp]> = [
      ['unknown type', { type: 'no_such_type' }, 'type', /unknown job type "no_such_type"/],
      ['payload not an object', { type: 'uppercase', payload: [1, 2] as never }, 'payload', /payload must be a JSON object, got array/],
      ['priority out of range', { type: 'uppercase', priority: 5000 }, 'priority', /priority must be an integer from 0 to 1000/],
      ['max_attempts < 1', { type: 'uppercase', maxAttempts: 0 }, 'maxAttempts', /max_attempts must be at least 1/],
      ['unknown weight', { type: 'uppercase', weight: 'gigantic' }, 'weight', /unknown weight class "gigantic": must be one of (?=.*"light")(?=.*"playwright")(?=.*"heavy")/],
      ['empty dedupe key', { type: 'uppercase', dedupeKey: '' }, 'dedupeKey', /dedupe_key/],
      ['negative delay', { type: 'uppercase', delayMs: -1 }, 'delayMs', /must not be negative/],
      ['half a concurrency limit', { type: 'uppercase', concurrencyKey: 'acct:1' }, 'concurrencyKey', /go together/],
    ];
    it.each(cases)('%s: a ValidationError naming the field, nothing written', async (_name, input, field, message) => {
      const before = await count(db.sql);
      const error = await enqueue(db.sql, input).catch((e) => e);
      expect(error).toBeInstanceOf(ValidationError);
      expect(error.field).toBe(field);
      expect(error.message).toMatch(message);
      expect(await count(db.sql)).toBe(before);
    });
  });
});
