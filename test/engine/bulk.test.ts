// Postgres matrix: bulk operations against settles.
import { beforeAll, describe, expect, it } from 'vitest';
import { bulkCancel, bulkRequeue, cancelJob, ConflictError, deadLetters, errorFingerprint, getJob, requeueJob, ValidationError } from '../../queue/index.ts';
import type { Sql } from '../../queue/db.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});

const T0 = new Date('2026-05-01T00:00:00Z');
let types = 0;

/** A job type of this test's own, so one test's jobs are not another's. */
async function newType(sql: Sql): Promise<string> {
  const type = `bulk_t${++types}`;
  await sql`insert into worker.job_types (type) values (${type})`;
  return type;
}

/** n ended jobs written as a finished run leaves them (started, attempts used, last_error). */
async function endedJobs(sql: Sql, type: string, n: number, o: { status?: string; error?: (i: number) => string; createdAt?: Date; finishedAt?: Date } = {}): Promise<string[]> {
  const status = o.status ?? 'failed';
  const errors = Array.from({ length: n }, (_, i) => o.error?.(i) ?? `boom ${i}`);
  const rows = await sql<{ id: string }[]>`
    insert into worker.jobs (type, status, attempts, last_error, created_at, started_at, finished_at)
    select ${type}, ${status}, 3, e, ${o.createdAt ?? T0}, ${o.createdAt ?? T0}, ${o.finishedAt ?? T0}
      from unnest(${errors}::text[]) e
    returning id`;
  return rows.map((r) => r.id).sort();
}

async function kindsOf(sql: Sql, id: string): Promise<string[]> {
  return (await getJob(sql, id))!.events.map((e) => e.kind);
}

async function eventCounts(sql: Sql, ids: string[], kind: string): Promise<Map<string, number>> {
  const rows = await sql<{ job_id: string; n: number }[]>`
    select job_id, count(*)::int as n from worker.job_events where job_id = any (${ids}::uuid[]) and kind = ${kind} group by job_id`;
  return new Map(rows.map((r) => [r.job_id, r.n]));
}

/** Resolves once another session waits for a row lock (the race's loser is blocked, not done). */
async function lockWaiters(sql: Sql, n: number): Promise<void> {
  for (;;) {
    const [row] = await sql<{ n: number }[]>`
      select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`;
    if (row!.n >= n) return;
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('error fingerprint', () => {
  it('groups failures that differ only in ids, numbers, hex, quoted values and times', async () => {
    const a = await errorFingerprint(db.sql, "droplet 0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b: HTTP 503 after 3 tries at 2026-05-01T10:00:00Z (req 0xdeadbeef, tag 'blue', sha 9f8e7d6c5b4a)");
    const b = await errorFingerprint(db.sql, 'droplet 0190ffff-0000-7000-8000-000000000001: HTTP 503 after 12 tries at 2026-06-02 11:30:45.123+02 (req 0x1f, tag "green", sha 1a2b3c4d5e6f7a8b)');
    expect(a).toMatch(/^[0-9a-f]{16}$/);
    expect(b).toBe(a);
    expect(await errorFingerprint(db.sql, 'droplet x: HTTP 503 after 3 retries')).not.toBe(a);
    // words are kept, numbers inside words too (v2 stays v2), runs of space collapse
    const [row] = await db.sql<{ n: string }[]>`select worker.normalize_error(${'provider v2   refused  job 42 of account "acme"'}) as n`;
    expect(row!.n).toBe('provider v2 refused job <n> of account <value>');
    expect(await errorFingerprint(db.sql, null)).toBe(await errorFingerprint(db.sql, ''));
  });
});

describe('bulk filter', () => {
  it('refuses an empty filter unless all is given, and bad fields by name, writing nothing', async () => {
    const type = await newType(db.sql);
    const [id] = await endedJobs(db.sql, type, 1);
    const refused = async (filter: object, field: string, op: (sql: Sql, f: never) => Promise<unknown> = bulkRequeue) => {
      const error = await op(db.sql, filter as never).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ValidationError);
      expect((error as ValidationError).field).toBe(field);
    };
    await refused({}, 'filter');
    await refused({ typo: 1 }, 'filter.typo');
    await refused({ all: false }, 'filter.all');
    await refused({ type: 'no_such_type' }, 'filter.type');
    await refused({ status: 'done' }, 'filter.status');
    await refused({ status: 'failed' }, 'filter.status', bulkCancel);
    await refused({ status: [] }, 'filter.status');
    await refused({ type, createdAfter: 'next week' }, 'filter.createdAfter');
    await refused({ type, finishedAfter: T0.toISOString() }, 'filter.finishedAfter', bulkCancel);
    await refused({ type, fingerprint: 'abc' }, 'filter.fingerprint');
    await expect(bulkRequeue(db.sql, { type }, { batchSize: 0 })).rejects.toMatchObject({ field: 'batchSize' });
    expect((await getJob(db.sql, id!))!.job.status).toBe('failed');
    // "all" is the explicit everything
    const all = await bulkRequeue(db.sql, { all: true }, { dryRun: true });
    expect(all.matched).toBeGreaterThanOrEqual(1);
  });
});

describe('bulk retry', () => {
  it('counts in a dry run, then requeues just the jobs the filter takes, as requeueJob does', async () => {
    const type = await newType(db.sql);
    const early = await endedJobs(db.sql, type, 3, { createdAt: new Date(T0.getTime() - 86_400_000), finishedAt: new Date(T0.getTime() - 86_400_000) });
    const timeouts = await endedJobs(db.sql, type, 4, { error: (i) => `timeout after ${i * 100} ms` });
    const other = await endedJobs(db.sql, type, 2, { error: () => 'invalid payload' });
    const cancelled = await endedJobs(db.sql, type, 1, { status: 'cancelled', error: () => 'cancelled by operator' });
    const fp = await errorFingerprint(db.sql, 'timeout after 5 ms');

    const dry = await bulkRequeue(db.sql, { type, fingerprint: fp }, { dryRun: true });
    expect(dry).toMatchObject({ dryRun: true, matched: 4, requeued: 0 });
    expect((await getJob(db.sql, timeouts[0]!))!.job.status).toBe('failed');

    const done = await bulkRequeue(db.sql, { type, fingerprint: fp, status: 'failed' }, { now: T0 });
    expect(done).toMatchObject({ dryRun: false, matched: 4, requeued: 4, skipped: 0, batches: 1, nextCursor: null });
    for (const id of timeouts) {
      expect((await getJob(db.sql, id))!.job).toMatchObject({ status: 'queued', attempts: 0, lastError: null });
      expect((await kindsOf(db.sql, id)).at(-1)).toBe('requeued');
    }
    for (const id of [...early, ...other, ...cancelled]) expect((await getJob(db.sql, id))!.job.status).not.toBe('queued');

    // a time range: created before T0 takes the early ones only; then status picks the cancelled one
    expect(await bulkRequeue(db.sql, { type, createdBefore: T0 }, { dryRun: true })).toMatchObject({ matched: 3 });
    expect(await bulkRequeue(db.sql, { type, finishedAfter: T0, status: ['cancelled'] })).toMatchObject({ matched: 1, requeued: 1 });
    expect((await getJob(db.sql, cancelled[0]!))!.job.status).toBe('queued');
  });

  it('skips a job whose dedupe key another job holds, and goes on', async () => {
    // a waiting job holds the key's waiting slot; the first requeued job takes its active slot
    const type = await newType(db.sql);
    const [a, b] = await endedJobs(db.sql, type, 2);
    await db.sql`update worker.jobs set dedupe_key = 'same' where id in (${a!}, ${b!})`;
    await db.sql`insert into worker.jobs (type, dedupe_key) values (${type}, 'same')`;
    expect(await bulkRequeue(db.sql, { type, status: 'failed' })).toMatchObject({ matched: 2, requeued: 1, skipped: 1 });
  });

  it('walks a set in batches with a cursor, each batch one transaction; maxJobs stops and answers where to go on', async () => {
    const type = await newType(db.sql);
    const ids = await endedJobs(db.sql, type, 25);
    const first = await bulkRequeue(db.sql, { type }, { batchSize: 10, maxJobs: 10 });
    expect(first).toMatchObject({ matched: 10, requeued: 10, batches: 1 });
    expect(first.nextCursor).toBe(ids[9]);
    const rest = await bulkRequeue(db.sql, { type }, { batchSize: 10, cursor: first.nextCursor });
    expect(rest).toMatchObject({ matched: 15, requeued: 15, batches: 2, nextCursor: null });
  });
});

describe('bulk cancel', () => {
  it('cancels never-started jobs at once and requests the cancel of started ones', async () => {
    const type = await newType(db.sql);
    const fresh = await db.sql<{ id: string }[]>`insert into worker.jobs (type) select ${type} from generate_series(1, 3) returning id`;
    const [started] = await db.sql<{ id: string }[]>`insert into worker.jobs (type, started_at, step) values (${type}, now(), 'poll') returning id`;
    expect(await bulkCancel(db.sql, { type }, { dryRun: true })).toMatchObject({ matched: 4, cancelled: 0 });
    expect(await bulkCancel(db.sql, { type }, { reason: 'bad deploy', now: T0 })).toMatchObject({ matched: 4, cancelled: 3, cancelRequested: 1, skipped: 0 });
    for (const { id } of fresh) expect((await getJob(db.sql, id))!.job).toMatchObject({ status: 'cancelled', lastError: 'bad deploy' });
    expect((await getJob(db.sql, started!.id))!.job).toMatchObject({ status: 'queued', cancelReason: 'bad deploy' });
    // the requested one has nothing left to do: a second bulk cancel does not take it
    expect(await bulkCancel(db.sql, { type }, { dryRun: true })).toMatchObject({ matched: 0 });
  });
});

describe('bulk races', () => {
  it('a single cancel racing a bulk retry waits for its batch, then cancels the requeued job', async () => {
    const type = await newType(db.sql);
    const ids = await endedJobs(db.sql, type, 5);
    const other = db.client(2);
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let ran!: () => void;
    const batchRan = new Promise<void>((r) => (ran = r));
    const batch = db.sql.begin(async (tx) => {
      await tx`select * from worker.bulk_requeue(${db.sql.json({ type })}::jsonb, false)`;
      ran();
      await gate;
    });
    await batchRan;
    // the uncommitted batch holds ids[2]: the cancel waits for it rather than seeing it failed
    const cancel = cancelJob(other, ids[2]!, 'operator changed their mind');
    await lockWaiters(db.sql, 1);
    release();
    await batch;
    const cancelled = await cancel;
    expect(cancelled).toMatchObject({ status: 'queued', cancelReason: 'operator changed their mind' });
    expect(await kindsOf(db.sql, ids[2]!)).toEqual(['requeued', 'cancel_requested']);
  });

  it('a bulk retry racing a single operation on one of its jobs waits, then skips it: each job requeued once', async () => {
    const type = await newType(db.sql);
    const ids = await endedJobs(db.sql, type, 5);
    const other = db.client(2);
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const single = db.sql.begin(async (tx) => {
      await requeueJob(tx as unknown as Sql, ids[3]!);
      await cancelJob(tx as unknown as Sql, ids[3]!, 'not this one');
      await gate;
    });
    await lockWaitersOrHolder(db.sql);
    const bulk = bulkRequeue(other, { type });
    await lockWaiters(db.sql, 1);
    release();
    await single;
    expect(await bulk).toMatchObject({ matched: 5, requeued: 4, skipped: 1 });
    expect([...(await eventCounts(db.sql, ids, 'requeued')).values()]).toEqual([1, 1, 1, 1, 1]);
    expect(await kindsOf(db.sql, ids[3]!)).toEqual(['requeued', 'cancel_requested']);
  });

  it('two bulk retries of one set requeue each job exactly once between them', async () => {
    const type = await newType(db.sql);
    const ids = await endedJobs(db.sql, type, 2000);
    const [a, b] = await Promise.all([bulkRequeue(db.client(2), { type }, { batchSize: 100 }), bulkRequeue(db.client(2), { type }, { batchSize: 100 })]);
    expect(a.requeued + b.requeued).toBe(2000);
    expect(a.requeued + a.skipped + b.requeued + b.skipped).toBe(a.matched + b.matched);
    const counts = await eventCounts(db.sql, ids, 'requeued');
    expect(counts.size).toBe(2000);
    expect([...counts.values()].every((n) => n === 1)).toBe(true);
  });
});

/** Resolves once some transaction of this database is open and idle (holding its locks). */
async function lockWaitersOrHolder(sql: Sql): Promise<void> {
  for (;;) {
    const [row] = await sql<{ n: number }[]>`select count(*)::int as n from pg_stat_activity where datname = current_database() and state = 'idle in transaction'`;
    if (row!.n > 0) return;
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('big sets', () => {
  it('retries 20,000 dead letters in batches of 1,000 and groups them first', async () => {
    const type = await newType(db.sql);
    await endedJobs(db.sql, type, 20_000, { error: (i) => (i % 4 === 0 ? `quota exceeded for account ${i}` : `HTTP 503 from droplet ${i}`) });
    const groups = (await deadLetters(db.sql, { type })).sort((x, y) => x.jobs - y.jobs);
    expect(groups.map((g) => [g.error, g.jobs])).toEqual([['quota exceeded for account <n>', 5000], ['HTTP <n> from droplet <n>', 15000]]);
    const started = performance.now();
    const dry = await bulkRequeue(db.sql, { type, fingerprint: groups[1]!.fingerprint }, { dryRun: true });
    const dryMs = performance.now() - started;
    const real = await bulkRequeue(db.sql, { type, fingerprint: groups[1]!.fingerprint }, { batchSize: 1000 });
    const realMs = performance.now() - started - dryMs;
    console.log(`bulk retry of 15,000 of 20,000: dry run ${dryMs.toFixed(0)} ms, ${real.batches} batches ${realMs.toFixed(0)} ms`);
    expect(dry.matched).toBe(15_000);
    expect(real).toMatchObject({ matched: 15_000, requeued: 15_000, skipped: 0, batches: 15, nextCursor: null });
    const [row] = await db.sql<{ queued: number; failed: number }[]>`
      select count(*) filter (where status = 'queued')::int as queued, count(*) filter (where status = 'failed')::int as failed from worker.jobs where type = ${type}`;
    expect(row).toEqual({ queued: 15_000, failed: 5_000 });
    expect((await deadLetters(db.sql, { type })).map((g) => g.jobs)).toEqual([5000]);
  }, 120_000);
});

describe('dead letters', () => {
  it('groups failed and oom_killed jobs by type and fingerprint with counts, first and last seen and the latest as sample', async () => {
    const type = await newType(db.sql);
    const t1 = new Date(T0.getTime() + 60_000);
    await endedJobs(db.sql, type, 2, { error: (i) => `disk full on node ${i}` });
    const [latest] = await endedJobs(db.sql, type, 1, { error: () => 'disk full on node 9', finishedAt: t1 });
    await endedJobs(db.sql, type, 1, { status: 'oom_killed', error: () => 'lease expired' });
    await endedJobs(db.sql, type, 1, { status: 'cancelled', error: () => 'cancelled by operator' });
    const groups = await deadLetters(db.sql, { type });
    expect(groups).toEqual([
      { type, fingerprint: await errorFingerprint(db.sql, 'disk full on node 1'), error: 'disk full on node <n>', jobs: 3, failed: 3, oomKilled: 0,
        firstSeen: T0, lastSeen: t1, sampleId: latest, sampleError: 'disk full on node 9' },
      expect.objectContaining({ error: 'lease expired', jobs: 1, failed: 0, oomKilled: 1 }),
    ]);
    await expect(cancelJob(db.sql, latest!)).rejects.toBeInstanceOf(ConflictError);
  });
});
