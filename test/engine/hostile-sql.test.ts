import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Sql } from '../../queue/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { hostileString, hostileTimestamp, hostileValue, malformedJson } from '../support/hostile.ts';

/**
 * worker.enqueue_job and worker.enqueue_jobs are what other services call with plain SQL, so
 * they get every kind of bad argument: wrong types, SQL fragments in every text field, NUL and
 * lone surrogates, huge and deeply nested payloads, malformed JSON, impossible times. Each call
 * either enqueues exactly what it was given (the fragments stored as data, never run) or fails
 * with a SQLSTATE that names a data problem, and writes nothing.
 */

/** Data errors a caller can act on: our SB400/SB409, and Postgres's own for values that cannot be cast or stored. */
const CLEAN_ERRORS = new Set([
  'SB400', // invalid argument, named in the message and column
  'SB409', // submit_key reused with another request
  '22P02', // invalid text representation (not an integer, not JSON)
  '22003', // numeric value out of range
  '22007', // invalid datetime format
  '22008', // datetime field overflow
  '22009', // invalid time zone displacement
  '22023', // a time whose zone Postgres does not know ("0'0A+": time zone "a+" not recognized)
  '22021', // NUL byte in text
  '22P05', // \u0000 in jsonb
  '54001', // JSON nested too deep to parse
]);

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});

async function snapshot(sql: Sql) {
  const [row] = await sql`select (select count(*)::int from worker.jobs) as jobs, (select count(*)::int from worker.job_history) as events`;
  return row as { jobs: number; events: number };
}

/**
 * Every argument travels as text and is cast in SQL, as a caller's text would be: the values
 * reach the function (and its casts) as given, not the client library's own encoders.
 */
const asText = (v: unknown): string | null => (v === null || v === undefined ? null : typeof v === 'string' ? v : JSON.stringify(v));

/** Mostly a good value, sometimes a hostile one, sometimes SQL NULL: so some whole calls succeed. */
const field = <T, U>(good: fc.Arbitrary<T>, bad: fc.Arbitrary<U>) =>
  fc.oneof({ weight: 6, arbitrary: good }, { weight: 1, arbitrary: bad }, { weight: 2, arbitrary: fc.constant(null) });
const intLike = fc.oneof(fc.integer({ min: -5, max: 1005 }), fc.constantFrom(2 ** 31, -(2 ** 31) - 1, 2 ** 63, 1.5), hostileString);
/** A string as it reaches Postgres: UTF-8 has no lone surrogates, the client sends U+FFFD for one. */
const utf8 = (s: string | null) => (s === null ? null : new TextDecoder('utf-8', { ignoreBOM: true }).decode(new TextEncoder().encode(s)));
const maybe = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: null, freq: 2 });

const enqueueArgs = fc.record({
  type: fc.oneof({ weight: 5, arbitrary: fc.constantFrom('uppercase', 'countdown', 'fail') }, { weight: 1, arbitrary: fc.oneof(hostileString, fc.constant(null)) }),
  payload: fc.oneof(
    { weight: 4, arbitrary: fc.dictionary(hostileString, fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 }).map((v) => JSON.stringify(v)) },
    fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v)),
    fc.dictionary(hostileString, hostileValue, { maxKeys: 3 }).map((v) => JSON.stringify(v)),
    malformedJson,
    fc.constantFrom(3, 20, 1000, 30_000).map((d) => '{"a":'.repeat(d) + '1' + '}'.repeat(d)),
    fc.constant(null),
  ),
  priority: field(fc.integer({ min: 0, max: 1000 }), intLike),
  runAt: field(fc.date({ min: new Date('2020-01-01'), max: new Date('2100-01-01'), noInvalidDate: true }).map((d) => d.toISOString()), hostileTimestamp),
  maxAttempts: field(fc.integer({ min: 1, max: 10 }), intLike),
  dedupeKey: maybe(hostileString),
  submitKey: maybe(hostileString),
  pool: maybe(hostileString),
  weight: field(fc.constantFrom('light', 'heavy'), hostileString),
  concurrencyKey: maybe(hostileString),
  concurrencyLimit: field(fc.integer({ min: 1, max: 5 }), intLike),
  delayMs: field(fc.integer({ min: 0, max: 10 ** 9 }), fc.oneof(fc.integer({ min: -10, max: -1 }), fc.constantFrom(2 ** 62, -(2 ** 62)), hostileString)),
});
type EnqueueArgs = typeof enqueueArgs extends fc.Arbitrary<infer T> ? T : never;

function callEnqueueJob(sql: Sql, a: EnqueueArgs) {
  return sql`
    select * from worker.enqueue_job(
      type => ${a.type}::text, payload => ${a.payload}::text::jsonb, priority => ${asText(a.priority)}::text::int,
      run_at => ${asText(a.runAt)}::text::timestamptz, max_attempts => ${asText(a.maxAttempts)}::text::int,
      dedupe_key => ${a.dedupeKey}::text, submit_key => ${a.submitKey}::text, pool => ${a.pool}::text, weight => ${a.weight}::text,
      concurrency_key => ${a.concurrencyKey}::text, concurrency_limit => ${asText(a.concurrencyLimit)}::text::int,
      delay_ms => ${asText(a.delayMs)}::text::bigint)`;
}

describe('worker.enqueue_job under hostile arguments', () => {
  it('enqueues exactly what it is given, or fails with a data error and writes nothing (property)', async () => {
    const seen = new Map<string, number>();
    await fc.assert(
      fc.asyncProperty(enqueueArgs, async (a) => {
        const before = await snapshot(db.sql);
        const submitted = a.submitKey === null ? [] : await db.sql`select id from worker.jobs where submit_key = ${a.submitKey}`.catch(() => []);
        let rows: Awaited<ReturnType<typeof callEnqueueJob>> | null = null;
        let error: { code?: string; message: string } | null = null;
        try {
          rows = await callEnqueueJob(db.sql, a);
        } catch (e) {
          error = e as { code?: string; message: string };
        }
        const after = await snapshot(db.sql);
        if (error) {
          seen.set(error.code ?? '?', (seen.get(error.code ?? '?') ?? 0) + 1);
          expect(CLEAN_ERRORS.has(error.code ?? ''), `${error.code}: ${error.message}`).toBe(true);
          expect(after).toEqual(before);
          return;
        }
        expect(rows).toHaveLength(1);
        const job = rows![0]!;
        if (submitted.length > 0) {
          // the same submit_key and request again: the earlier job, nothing new written
          expect(job.id).toBe(submitted[0]!.id);
          expect(after).toEqual(before);
          return;
        }
        seen.set('ok', (seen.get('ok') ?? 0) + 1);
        expect(after.jobs).toBe(before.jobs + 1);
        // what was given is what is stored: fragments are data
        const given = { type: a.type, dedupe_key: utf8(a.dedupeKey), submit_key: utf8(a.submitKey), pool: utf8(a.pool), concurrency_key: utf8(a.concurrencyKey) };
        expect(job).toMatchObject(given);
        expect(job.payload).toEqual(a.payload === null ? {} : JSON.parse(a.payload));
        const [stored] = await db.sql`select type, payload, dedupe_key, submit_key, pool, concurrency_key from worker.jobs where id = ${job.id}`;
        expect(stored).toEqual({ ...given, payload: job.payload });
        const events = await db.sql`select kind from worker.job_history where job_id = ${job.id}`;
        expect(events.map((e) => e.kind)).toEqual(['enqueued']);
      }),
      { numRuns: 400 },
    );
    console.log(`enqueue_job outcomes: ${JSON.stringify(Object.fromEntries(seen))}`);
    // the run covered both sides: accepted enqueues and several kinds of refusal
    expect(seen.get('ok') ?? 0).toBeGreaterThan(0);
    expect(seen.get('SB400') ?? 0).toBeGreaterThan(0);
    expect([...seen.keys()].length).toBeGreaterThan(3);
  });

  it('a batch is all or nothing under hostile elements (property)', async () => {
    const element = fc.record(
      {
        type: fc.oneof(fc.constantFrom('uppercase', 'countdown'), hostileString, hostileValue),
        payload: fc.oneof(fc.constant({ text: 'x' }), hostileValue),
        priority: fc.oneof(fc.integer({ min: 0, max: 1000 }), hostileValue),
        runAt: hostileTimestamp,
        delayMs: fc.oneof(fc.integer({ min: 0, max: 10_000 }), hostileValue),
        maxAttempts: fc.oneof(fc.integer({ min: 1, max: 5 }), hostileValue),
        dedupeKey: fc.oneof(hostileString, hostileValue),
        submitKey: hostileString,
        pool: hostileString,
        weight: fc.oneof(fc.constantFrom('light', 'heavy'), hostileValue),
        concurrencyKey: hostileString,
        concurrencyLimit: fc.oneof(fc.integer({ min: 1, max: 3 }), hostileValue),
      },
      { requiredKeys: [] },
    );
    await fc.assert(
      fc.asyncProperty(fc.oneof(fc.array(element, { minLength: 1, maxLength: 6 }), hostileValue), async (jobs) => {
        const before = await snapshot(db.sql);
        let error: { code?: string; message: string } | null = null;
        let rows: readonly unknown[] = [];
        try {
          rows = await db.sql`select worker.enqueue_jobs(${JSON.stringify(jobs)}::text::jsonb)`;
        } catch (e) {
          error = e as { code?: string; message: string };
        }
        const after = await snapshot(db.sql);
        if (error) {
          expect(CLEAN_ERRORS.has(error.code ?? ''), `${error.code}: ${error.message}`).toBe(true);
          expect(after).toEqual(before);
        } else if (Array.isArray(jobs)) {
          expect(rows).toHaveLength(jobs.length);
          expect(after.jobs).toBeLessThanOrEqual(before.jobs + jobs.length);
        } else {
          // only a JSON null gets past the array check (jsonb_typeof(null) is null): an empty batch
          expect(jobs).toBeNull();
          expect(rows).toHaveLength(0);
          expect(after).toEqual(before);
        }
      }),
      { numRuns: 250 },
    );
  });

  it('refuses a payload nested deeper than Postgres can parse, cleanly', async () => {
    const before = await snapshot(db.sql);
    const deep = '{"a":'.repeat(200_000) + '1' + '}'.repeat(200_000);
    const error = await db.sql`select * from worker.enqueue_job('uppercase', ${deep}::text::jsonb)`.then(() => null, (e: { code?: string }) => e);
    expect(error?.code).toBe('54001');
    expect(await snapshot(db.sql)).toEqual(before);
  });
});
