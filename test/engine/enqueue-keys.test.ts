// Postgres matrix: concurrent enqueues on the same dedupe and submit keys.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { claimJobs, ConflictError, connect, continueJob, enqueue, enqueueBatch, pruneFinished, type Sql } from '../../queue/index.ts';
import { migrate, MIGRATIONS_DIR } from '../../queue/migrate.ts';
import { withDatabase } from '../../scripts/lib/database-url.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});

const DAY_MS = 86_400_000;

describe('submit_key with dedupe_key, concurrently', () => {
  it('leaves every key exactly one live job, and every superseded job names a job that exists', async () => {
    // Eight sessions, each call its own committed transaction, all eight racing on every key: a
    // session that loses the submit key must return the winner's job untouched, never cancel it.
    const sessions: Sql[] = Array.from({ length: 8 }, () => db.client(1));
    const keys = Array.from({ length: 600 }, (_, i) => `race-both-${i}`);
    const results: Array<{ key: string; id: string }> = [];
    for (const key of keys) {
      const round = await Promise.all(
        sessions.map(async (s) => {
          const [row] = await s`
            select id from worker.enqueue_job(type => 'uppercase', payload => '{"text":"race"}', submit_key => ${key},
                                              dedupe_key => ${key}, run_at => now() + interval '1 hour')`;
          return { key, id: row!.id as string };
        }),
      );
      results.push(...round);
    }
    const perKey = await db.sql`
      select submit_key as key, count(*) filter (where status <> 'cancelled')::int as live, count(*)::int as jobs
        from worker.jobs where submit_key like 'race-both-%' group by 1`;
    expect(perKey).toHaveLength(keys.length);
    expect(perKey.filter((r) => r.live !== 1 || r.jobs !== 1)).toEqual([]);
    const dangling = await db.sql`
      select j.id from worker.jobs j
       where j.status = 'cancelled' and not exists (select 1 from worker.jobs x where x.id = j.superseded_by)`;
    expect(dangling).toEqual([]);
    // every session was given the one job of its key
    const idOf = new Map(await db.sql`select submit_key, id from worker.jobs where submit_key like 'race-both-%'`.then((rows) => rows.map((r) => [r.submit_key as string, r.id as string])));
    expect(results.filter((r) => idOf.get(r.key) !== r.id)).toEqual([]);
  });
});

describe('submit_key identity lives with the job, not in prunable history', () => {
  const request = (text: string) => ({ type: 'uppercase', payload: { text }, priority: 20, maxAttempts: 4, pool: 'idem', dedupeKey: `idem:${text}` });

  it('a job scheduled 40 days out: after the default event prune, the identical resubmit is the same job, a different one a 409', async () => {
    const t0 = new Date('2020-06-01T00:00:00Z');
    const first = await enqueue(db.sql, { ...request('far'), submitKey: 'idem-40d', runAt: new Date(t0.getTime() + 40 * DAY_MS) }, { now: t0 });
    const later = new Date(t0.getTime() + 31 * DAY_MS);
    const pruned = await pruneFinished(db.sql, { now: later });
    expect(pruned.events).toBeGreaterThan(0);
    // the premise: the job is still queued and its enqueued event is gone
    expect((await db.sql`select status from worker.jobs where id = ${first.job.id}`)[0]!.status).toBe('queued');
    expect(await db.sql`select kind from worker.job_history where job_id = ${first.job.id}`).toEqual([]);

    const again = await enqueue(db.sql, { ...request('far'), submitKey: 'idem-40d', runAt: new Date(later.getTime() + 9 * DAY_MS) }, { now: later });
    expect(again).toMatchObject({ duplicate: true, job: { id: first.job.id, status: 'queued' } });
    const [batch] = await enqueueBatch(db.sql, [{ ...request('far'), submitKey: 'idem-40d' }], { now: later });
    expect(batch).toMatchObject({ duplicate: true, job: { id: first.job.id } });

    for (const different of [{ ...request('other'), dedupeKey: 'idem:far' }, { ...request('far'), priority: 21 }, { ...request('far'), maxAttempts: undefined }]) {
      const error = await enqueue(db.sql, { ...different, submitKey: 'idem-40d' }, { now: later }).catch((e) => e);
      expect(error).toBeInstanceOf(ConflictError);
      expect(error.message).toContain(first.job.id);
    }
    const batchError = await enqueueBatch(db.sql, [{ ...request('far'), priority: 99, submitKey: 'idem-40d' }], { now: later }).catch((e) => e);
    expect(batchError).toMatchObject({ name: 'ConflictError', field: 'jobs[0].submitKey' });
    expect(await db.sql`select count(*)::int as n from worker.jobs where submit_key = 'idem-40d'`).toEqual([{ n: 1 }]);
  });

  it('a parked job: after an event prune of one hour, the identical resubmit is the same job, a different one a 409', async () => {
    const t0 = new Date('2020-03-01T00:00:00Z');
    const first = await enqueue(db.sql, { ...request('parked'), submitKey: 'idem-parked' }, { now: t0 });
    const claimed = await claimJobs(db.sql, { workerId: 'idem-test', pool: 'idem', limit: 10, now: t0 });
    expect(claimed.map((j) => j.id)).toEqual([first.job.id]);
    expect(await continueJob(db.sql, claimed[0]!, { step: 'wait', delayMs: null }, { now: t0 })).toBe(true);
    const later = new Date(t0.getTime() + 2 * 3_600_000);
    await pruneFinished(db.sql, { now: later, eventRetentionMs: 3_600_000 });
    expect(await db.sql`select kind from worker.job_history where job_id = ${first.job.id}`).toEqual([]);

    const again = await enqueue(db.sql, { ...request('parked'), submitKey: 'idem-parked' }, { now: later });
    expect(again).toMatchObject({ duplicate: true, job: { id: first.job.id, status: 'queued', step: 'wait' } });
    const error = await enqueue(db.sql, { ...request('parked'), payload: { text: 'changed' }, submitKey: 'idem-parked' }, { now: later }).catch((e) => e);
    expect(error).toBeInstanceOf(ConflictError);
  });

  it('keyless jobs store no identity; a pruned job takes its key and identity with it', async () => {
    const plain = await enqueue(db.sql, { type: 'uppercase', payload: { text: 'no key' }, dedupeKey: 'idem-none' });
    const [batch] = await enqueueBatch(db.sql, [{ type: 'uppercase', payload: { text: 'no key either' } }]);
    expect(await db.sql`select submit_key from worker.submit_keys where job_id in ${db.sql([plain.job.id, batch!.job.id])}`).toEqual([]);

    const t0 = new Date('2020-01-01T00:00:00Z');
    const keyed = await enqueue(db.sql, { type: 'uppercase', payload: { text: 'gone' }, submitKey: 'idem-gone' }, { now: t0 });
    expect(await db.sql`select submit_key, request from worker.submit_keys where job_id = ${keyed.job.id}`).toEqual([
      { submit_key: 'idem-gone', request: { type: 'uppercase', priority: 50, maxAttempts: null, dedupeKey: null, pool: null, weight: null, concurrencyKey: null, concurrencyLimit: null } },
    ]);
    await db.sql`update worker.jobs set status = 'cancelled', finished_at = ${t0} where id = ${keyed.job.id}`;
    await pruneFinished(db.sql, { now: new Date(t0.getTime() + 8 * DAY_MS) });
    expect(await db.sql`select 1 from worker.jobs where id = ${keyed.job.id}`).toEqual([]);
    expect(await db.sql`select 1 from worker.submit_keys where submit_key = 'idem-gone'`).toEqual([]);
    // the key is free again, for a new job
    expect(await enqueue(db.sql, { type: 'uppercase', payload: { text: 'anew' }, submitKey: 'idem-gone' })).toMatchObject({ duplicate: false });
  });
});

describe('a submit key whose job is gone', () => {
  // Each enqueue gets a statement timeout: the failure this guards against was an enqueue that
  // looped forever on a key reserved for a job that no longer existed.
  const enqueueWithin = (sql: Sql, key: string) =>
    sql.begin(async (tx) => {
      await tx`set local statement_timeout = '5s'`;
      return enqueue(tx, { type: 'uppercase', payload: { text: 'again' }, submitKey: key });
    });

  it('after truncate worker.jobs, the key is free: the next enqueue makes a new job', async () => {
    const first = await enqueue(db.sql, { type: 'uppercase', payload: { text: 'first' }, submitKey: 'truncated-key' });
    await db.sql`truncate worker.jobs, worker.job_events`;
    const [keys] = await db.sql`select count(*)::int as n from worker.submit_keys`;
    expect(keys!.n).toBe(0);
    const again = await enqueueWithin(db.sql, 'truncated-key');
    expect(again.duplicate).toBe(false);
    expect(again.job.id).not.toBe(first.job.id);
  });

  it('a key left behind by a delete that fired no trigger is freed by the next enqueue of it', async () => {
    const first = await enqueue(db.sql, { type: 'uppercase', payload: { text: 'first' }, submitKey: 'orphaned-key' });
    // a delete with row triggers off (as a replica or a restore runs it) leaves the key behind
    await db.sql.begin(async (tx) => {
      await tx`set local session_replication_role = replica`;
      await tx`delete from worker.job_events where job_id = ${first.job.id}`;
      await tx`delete from worker.jobs where id = ${first.job.id}`;
    });
    const [left] = await db.sql`select job_id from worker.submit_keys where submit_key = 'orphaned-key'`;
    expect(left?.job_id).toBe(first.job.id);
    const again = await enqueueWithin(db.sql, 'orphaned-key');
    expect(again.duplicate).toBe(false);
    const [key] = await db.sql`select job_id from worker.submit_keys where submit_key = 'orphaned-key'`;
    expect(key?.job_id).toBe(again.job.id);
  });
});

describe('migration 0070', () => {
  const admin = postgres(inject('adminDatabaseUrl'), { max: 1, onnotice: () => {} });
  const name = `sbt_enqkeys_${randomBytes(4).toString('hex')}`;
  const before = mkdtempSync(join(tmpdir(), 'sbw-migrations-'));
  afterAll(async () => {
    await admin.unsafe(`drop database if exists ${name} with (force)`);
    await admin.end();
    rmSync(before, { recursive: true, force: true });
  });

  it('gives live submit-keyed jobs their identity from their enqueued events; a job whose event is gone still matches on its fields', async () => {
    for (const f of readdirSync(MIGRATIONS_DIR).filter((f) => f < '0070')) symlinkSync(join(MIGRATIONS_DIR, f), join(before, f));
    await admin.unsafe(`create database ${name}`);
    const sql = connect(withDatabase(inject('adminDatabaseUrl'), name), { max: 1 });
    try {
      await migrate(sql, before);
      const [kept] = await sql`select (worker.enqueue_job_ex('uppercase', '{"text":"kept"}', 20, null, 4, null, 'mig-kept'))->>'id' as id`;
      const [lost] = await sql`select (worker.enqueue_job_ex('uppercase', '{"text":"lost"}', 20, null, 4, 'mig-d', 'mig-lost', 'p'))->>'id' as id`;
      await sql`delete from worker.job_events where job_id = ${lost!.id}`;
      await migrate(sql);
      const rows = await sql`select j.submit_key, k.request from worker.jobs j left join worker.submit_keys k on k.job_id = j.id order by 1`;
      expect(rows).toEqual([
        { submit_key: 'mig-kept', request: { type: 'uppercase', priority: 20, maxAttempts: 4, dedupeKey: null, pool: null, weight: null, concurrencyKey: null, concurrencyLimit: null } },
        { submit_key: 'mig-lost', request: null },
      ]);
      expect(await enqueue(sql, { type: 'uppercase', payload: { text: 'kept' }, priority: 20, maxAttempts: 4, submitKey: 'mig-kept' })).toMatchObject({ duplicate: true, job: { id: kept!.id } });
      expect(await enqueue(sql, { type: 'uppercase', payload: { text: 'lost' }, priority: 20, dedupeKey: 'mig-d', pool: 'p', submitKey: 'mig-lost' })).toMatchObject({ duplicate: true, job: { id: lost!.id } });
      await expect(enqueue(sql, { type: 'uppercase', payload: { text: 'kept' }, priority: 21, maxAttempts: 4, submitKey: 'mig-kept' })).rejects.toBeInstanceOf(ConflictError);
      await expect(enqueue(sql, { type: 'uppercase', payload: { text: 'other' }, dedupeKey: 'mig-d', pool: 'p', submitKey: 'mig-lost' })).rejects.toBeInstanceOf(ConflictError);
    } finally {
      await sql.end();
    }
  });
});
