import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { enqueue, enqueueBatch, JobRegistry, payloadJsonSchema, sampleJobTypes, ValidationError, type JsonObject, type Sql } from '../../queue/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { expectSqlRefusal } from '../support/refusals.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
  // what a runner (or the Worker) does at start: the types' schemas go into worker.job_types
  await new JobRegistry(sampleJobTypes).sync(db.sql);
});

const refusedFromSql = (act: () => Promise<unknown>, column: string, message: RegExp) => expectSqlRefusal(db.sql, act, column, message);

describe('a job pinned to a pool that can never run its weight class', () => {
  beforeAll(async () => {
    await db.sql`insert into worker.pool_capacity (pool, enabled, max_running_weight) values ('tiny', true, 7), ('roomy', true, 8)`;
    await db.sql`insert into worker.job_types (type, weight) values ('big_by_default', 'heavy')`;
  });

  it('is refused over SQL, naming weight, and nothing is written', async () => {
    await refusedFromSql(
      () => db.sql`select * from worker.enqueue_job(type => 'uppercase', payload => '{"text":"x"}', pool => 'tiny', weight => 'heavy')`,
      'weight',
      /weight "heavy" costs 8, more than pool "tiny" can ever run \(max_running_weight 7\)/,
    );
    // the type's default class counts the same
    await refusedFromSql(() => db.sql`select * from worker.enqueue_job(type => 'big_by_default', pool => 'tiny')`, 'weight', /weight "heavy"/);
    await refusedFromSql(
      () => db.sql`select * from worker.enqueue_jobs(${db.sql.json([{ type: 'uppercase', payload: { text: 'ok' } }, { type: 'uppercase', payload: { text: 'x' }, pool: 'tiny', weight: 'heavy' }])})`,
      'jobs[1].weight',
      /^jobs\[1\]: weight "heavy" costs 8/,
    );
    await refusedFromSql(
      () => db.sql`select * from worker.enqueue_jobs(${db.sql.json([{ type: 'uppercase', payload: { text: 'x' }, pool: 'tiny', weight: 'heavy', submitKey: 'tiny-1' }])})`,
      'jobs[0].weight',
      /weight "heavy" costs 8/,
    );
  });

  it('is refused from TypeScript with a ValidationError naming weight', async () => {
    const error = await enqueue(db.sql, { type: 'uppercase', payload: { text: 'x' }, pool: 'tiny', weight: 'heavy' }).catch((e) => e);
    expect(error).toBeInstanceOf(ValidationError);
    expect(error.field).toBe('weight');
    await expect(enqueueBatch(db.sql, [{ type: 'uppercase', payload: { text: 'x' }, pool: 'tiny', weight: 'heavy' }])).rejects.toMatchObject({ name: 'ValidationError', field: 'jobs[0].weight' });
  });

  it('is accepted where it fits: a pool with room, no capacity row, or no pool at all', async () => {
    for (const pool of ['roomy', 'uncapped', undefined]) {
      const { job } = await enqueue(db.sql, { type: 'uppercase', payload: { text: 'x' }, pool, weight: 'heavy' });
      expect(job).toMatchObject({ status: 'queued', weight: 'heavy', pool: pool ?? null });
    }
    expect((await enqueue(db.sql, { type: 'uppercase', payload: { text: 'x' }, pool: 'tiny' })).job.weight).toBe('light');
  });
});

describe('one validation for every enqueue path', () => {
  it('refuses a negative delay in a batch without keys exactly as enqueue_job does', async () => {
    const single = await db.sql`select * from worker.enqueue_job(type => 'uppercase', payload => '{"text":"x"}', delay_ms => -86400000)`.catch((e) => e);
    expect(single).toMatchObject({ code: 'SB400', column_name: 'delayMs' });
    for (const keys of [{}, { submitKey: 'neg-delay' }]) {
      await refusedFromSql(
        () => db.sql`select * from worker.enqueue_jobs(${db.sql.json([{ type: 'uppercase', payload: { text: 'x' }, delayMs: -86400000, ...keys }])})`,
        'jobs[0].delayMs',
        new RegExp(`^jobs\\[0\\]: ${single.message}$`),
      );
    }
  });

  const malformed: Array<[string, Record<string, unknown>, RegExp]> = [
    ['priority', { priority: 'x' }, /priority must be an integer, got "x"/],
    ['priority', { priority: 2 ** 40 }, /priority must be an integer from/],
    ['runAt', { runAt: 'nope' }, /runAt must be a timestamp/],
    ['runAt', { runAt: '2026-13-45T00:00:00Z' }, /runAt must be a timestamp/],
    ['runAt', { runAt: '99999999-01-01' }, /runAt must be a timestamp/],
    ['runAt', { runAt: 5 }, /runAt must be a timestamp/],
    ['maxAttempts', { maxAttempts: 1.5 }, /maxAttempts must be an integer, got 1.5/],
    ['delayMs', { delayMs: 'abc' }, /delayMs must be an integer, got "abc"/],
    ['delayMs', { delayMs: 2 ** 62 }, /delayMs must be at most/],
    ['concurrencyLimit', { concurrencyKey: 'k', concurrencyLimit: 'many' }, /concurrencyLimit must be an integer/],
    ['type', { type: { nested: true } }, /type must be a string, got object/],
    ['pool', { pool: ['a'] }, /pool must be a string, got array/],
  ];
  it.each(malformed)('a malformed %s in a batch is SB400 naming jobs[i].field, with keys and without (%j)', async (field, bad, message) => {
    for (const keys of [{}, { submitKey: `malformed-${field}-${JSON.stringify(bad)}` }]) {
      const jobs = [{ type: 'uppercase', payload: { text: 'fine' } }, { type: 'uppercase', payload: { text: 'bad' }, ...keys, ...bad }];
      await refusedFromSql(() => db.sql`select * from worker.enqueue_jobs(${db.sql.json(jobs as never)})`, `jobs[1].${field}`, message);
    }
  });

  it('takes a batch element field for field as enqueue_job takes its arguments', async () => {
    const [a] = await db.sql`select j from worker.enqueue_jobs(${db.sql.json([{ type: 'uppercase', payload: { text: 'same' }, priority: '7', runAt: '2030-01-01T00:00:00Z', maxAttempts: 2, pool: 'p', concurrencyKey: 'ck', concurrencyLimit: 2 }])}) j`;
    const [b] = await db.sql`select to_jsonb(j) as j from worker.enqueue_job(type => 'uppercase', payload => '{"text":"same"}', priority => 7, run_at => '2030-01-01T00:00:00Z', max_attempts => 2, pool => 'p', concurrency_key => 'ck', concurrency_limit => 2) j`;
    const pick = ({ type, payload, priority, run_at, max_attempts, pool, weight, concurrency_key, concurrency_limit, status }: Record<string, unknown>) => ({ type, payload, priority, run_at, max_attempts, pool, weight, concurrency_key, concurrency_limit, status });
    expect(pick(a!.j)).toEqual(pick(b!.j));
  });
});

describe('a plain batch (every element type, payload, priority, maxAttempts: inserted set-wise)', () => {
  const NOW = '2031-02-03T04:05:06.789Z';
  const enqueueJobs = async (jobs: unknown[]) =>
    (await db.sql`select j from worker.enqueue_jobs(${db.sql.json(jobs as never)}, ${NOW}::timestamptz) j`).map((r) => r.j as Record<string, unknown>);
  const fields = ({ id: _id, enqueued_event_id: _e, ...rest }: Record<string, unknown>) => rest;

  it('writes each element the row the element path writes, in order', async () => {
    const element = fc.record({
      type: fc.constantFrom('uppercase', 'countdown', 'fail'),
      priority: fc.option(fc.integer({ min: 0, max: 1000 }), { nil: undefined }),
      maxAttempts: fc.option(fc.integer({ min: 1, max: 50 }), { nil: undefined }),
    }, { requiredKeys: ['type'] }).map((e) => ({
      ...e,
      payload: e.type === 'uppercase' ? { text: `t${e.priority ?? 'x'}` } : e.type === 'countdown' ? { n: 1 } : {},
    }));
    await fc.assert(fc.asyncProperty(fc.array(element, { minLength: 1, maxLength: 8 }), async (jobs) => {
      const plain = await enqueueJobs(jobs);
      // "runAt": null is what the element path alone takes; it means "now", as leaving it out does
      const viaElements = await enqueueJobs(jobs.map((j) => ({ ...j, runAt: null })));
      expect(plain.map(fields)).toEqual(viaElements.map(fields));
      expect(plain.map((j) => j.payload)).toEqual(jobs.map((j) => j.payload));
      expect(plain.map((j) => j.id as string)).toEqual(plain.map((j) => j.id as string).sort());
    }), { numRuns: 25 });
  });

  it('takes no element through the per-element functions (what it saves), and the others still do', async () => {
    const calls = await db.sql.begin(async (tx) => {
      await tx`set local track_functions = 'pl'`;
      const counted = async () =>
        Number((await tx`select coalesce(sum(calls), 0)::int as n from pg_stat_xact_user_functions where funcname = 'prepare_enqueue_element'`)[0]!.n);
      await tx`select * from worker.enqueue_jobs(${tx.json([{ type: 'fail', payload: {} }, { type: 'uppercase', payload: { text: 'a' }, priority: 3 }])})`;
      const plain = await counted();
      await tx`select * from worker.enqueue_jobs(${tx.json([{ type: 'fail', payload: {}, runAt: null }, { type: 'fail', payload: {} }])})`;
      return { plain, mixed: (await counted()) - plain };
    });
    expect(calls).toEqual({ plain: 0, mixed: 2 });
  });

  it('hands an element it cannot take as it is to the element path, which names it or takes it', async () => {
    // an integral 5.0, a string priority, a number type: the element path decides
    const [fivePointZero] = await enqueueJobs([{ type: 'fail', payload: {}, priority: 5.0 }]);
    expect(fivePointZero!.priority).toBe(5);
    const [fromString] = await enqueueJobs([{ type: 'fail', payload: {}, priority: '7' }]);
    expect(fromString!.priority).toBe(7);
    const before = (await db.sql`select count(*)::int as n from worker.jobs`)[0]!.n;
    await refusedFromSql(() => enqueueJobs([{ type: 'fail', payload: {} }, { type: 'fail', payload: {}, priority: 1001 }]), 'jobs[1].priority', /^jobs\[1\]: priority must be an integer from 0 to 1000/);
    await refusedFromSql(() => enqueueJobs([{ type: 'fail', payload: {} }, { type: 'uppercase', payload: { text: 2 } }]), 'jobs[1].payload.text', /^jobs\[1\]: payload\.text must be of type string/);
    await refusedFromSql(() => enqueueJobs([{ type: 'nope', payload: {} }]), 'jobs[0].type', /^jobs\[0\]: unknown job type "nope"/);
    expect((await db.sql`select count(*)::int as n from worker.jobs`)[0]!.n).toBe(before);
  });
});

describe('the payload is checked against the type\'s schema at enqueue', () => {
  const bad: Array<[string, string, string | null, string, RegExp]> = [
    ['a number for a string', 'uppercase', '{"text":1}', 'payload.text', /^payload\.text must be of type string, got number$/],
    ['no payload', 'uppercase', null, 'payload.text', /^payload\.text is required$/],
    ['an empty payload', 'uppercase', '{}', 'payload.text', /^payload\.text is required$/],
    ['a 250 KiB text', 'uppercase', JSON.stringify({ text: 'x'.repeat(250 * 1024) }), 'payload.text', /^payload\.text must be at most 65536 characters, got 256000$/],
    ['a fraction for an integer', 'countdown', '{"n":1.5}', 'payload.n', /^payload\.n must be of type integer, got a number with a fraction$/],
    ['below the minimum', 'countdown', '{"n":-1}', 'payload.n', /^payload\.n must be at least 0, got -1$/],
    ['above the maximum', 'countdown', '{"n":3,"delayMs":3600001}', 'payload.delayMs', /^payload\.delayMs must be at most 3600000, got 3600001$/],
    ['a wrong type for an optional field', 'fail', '{"message":false}', 'payload.message', /^payload\.message must be of type string, got boolean$/],
  ];
  it.each(bad)('%s is SB400 naming the field, from SQL', async (_name, type, payload, column, message) => {
    if (payload === null) {
      await refusedFromSql(() => db.sql`select * from worker.enqueue_job(type => ${type})`, column, message);
    } else {
      await refusedFromSql(() => db.sql`select * from worker.enqueue_job(type => ${type}, payload => ${payload}::text::jsonb)`, column, message);
    }
    message = new RegExp(`^jobs\\[0\\]: ${message.source.slice(1)}`);
    const element = payload === null ? { type } : { type, payload: JSON.parse(payload) };
    await refusedFromSql(() => db.sql`select * from worker.enqueue_jobs(${db.sql.json([element])})`, `jobs[0].${column}`, message);
    await refusedFromSql(() => db.sql`select * from worker.enqueue_jobs(${db.sql.json([{ ...element, submitKey: `schema-${_name}` }])})`, `jobs[0].${column}`, message);
  });

  it('is a ValidationError naming the field from TypeScript', async () => {
    const error = await enqueue(db.sql, { type: 'uppercase', payload: { text: 1 } }).catch((e) => e);
    expect(error).toBeInstanceOf(ValidationError);
    expect(error).toMatchObject({ field: 'payload.text', message: expect.stringContaining('payload.text') });
  });

  it('accepts what the schema accepts (and what zod drops: unknown fields of a non-strict object)', async () => {
    for (const [type, payload] of [
      ['uppercase', { text: 'x'.repeat(65_536) }],
      ['uppercase', { text: '', extra: [1, { a: null }] }],
      ['countdown', { n: 0, delayMs: 3_600_000 }],
      ['countdown', { n: 10_000 }],
      ['fail', {}],
    ] as Array<[string, JsonObject]>) {
      const { job } = await enqueue(db.sql, { type, payload });
      expect(job.payload).toEqual(payload);
      expect(sampleJobTypes.find((t) => t.type === type)!.payload.safeParse(job.payload).success).toBe(true);
    }
  });

  it('stores each type\'s schema when the registry syncs, and a changed schema on the next sync', async () => {
    const [row] = await db.sql`select payload_schema from worker.job_types where type = 'uppercase'`;
    expect(row!.payload_schema).toEqual({ type: 'object', properties: { text: { type: 'string', maxLength: 65_536 } }, required: ['text'] });
    const v1 = { type: 'schema_probe', payload: z.object({ a: z.string() }), run: async () => ({ outcome: 'done' as const }) };
    await new JobRegistry([v1]).sync(db.sql);
    await expect(enqueue(db.sql, { type: 'schema_probe', payload: { b: 1 } })).rejects.toMatchObject({ field: 'payload.a' });
    await new JobRegistry([{ ...v1, payload: z.object({ b: z.number() }) }]).sync(db.sql);
    expect((await enqueue(db.sql, { type: 'schema_probe', payload: { b: 1 } })).job.payload).toEqual({ b: 1 });
  });
});

describe('the enqueue check never refuses a payload zod accepts', () => {
  // zod features whose accepted inputs the JSON Schema does not state (coerce, catch, preprocess,
  // transform, custom), beside the ones it states exactly
  const schemas: Record<string, z.ZodType> = {
    strings: z.object({ s: z.string().min(2).max(4), e: z.enum(['a', 'b']).optional(), l: z.literal('x').optional() }),
    numbers: z.object({ i: z.int().min(-3).max(3), n: z.number().gt(0).lt(1).optional(), p: z.number().int().positive().optional() }),
    nullable: z.object({ s: z.string().nullable(), t: z.number().nullish() }),
    strict: z.strictObject({ a: z.boolean(), b: z.array(z.string()).optional() }),
    nested: z.object({ o: z.object({ x: z.string().max(1) }), r: z.record(z.string(), z.number()).optional() }),
    lenient: z.object({
      c: z.coerce.number().min(1),
      k: z.string().max(1).catch('z'),
      p: z.preprocess((v) => (typeof v === 'string' ? Number(v) : v), z.number()),
      t: z.string().transform((s) => s.length),
      u: z.custom<string>((v) => v === undefined || typeof v === 'string'),
      d: z.number().default(1),
    }),
    unions: z.union([z.object({ kind: z.literal('a'), a: z.string() }), z.object({ kind: z.literal('b') })]),
  };
  const value = fc.oneof(
    fc.constantFrom(null, true, false, 0, 1, -1, 1.5, 2, 3, 4, -3, -4, 0.5, 1e300, 2 ** 53, 'a', 'b', 'x', 'ab', 'abcd', 'abcde', '😀', '😀😀', '😀a', '', '1', 'z'),
    fc.jsonValue({ maxDepth: 2 }),
  );
  const key = fc.constantFrom('s', 'e', 'l', 'i', 'n', 'p', 't', 'a', 'b', 'o', 'r', 'c', 'k', 'u', 'd', 'x', 'kind', 'zz');
  const payload = fc.dictionary(key, fc.oneof(value, fc.dictionary(key, value, { maxKeys: 3 })), { maxKeys: 6 });

  for (const [name, schema] of Object.entries(schemas)) {
    it(`${name} (property)`, async () => {
      const json = payloadJsonSchema(schema);
      expect(json).not.toBeNull();
      await fc.assert(
        fc.asyncProperty(payload, async (p) => {
          // the value the runner will parse: jsonb's text, read back by JSON.parse
          const [row] = await db.sql`select ${db.sql.json(p)}::jsonb as stored`;
          const accepted = schema.safeParse(row!.stored).success;
          const refusal = await db.sql`select worker.check_payload(${db.sql.json(json!)}::jsonb, ${db.sql.json(p)}::jsonb, 'payload')`.then(() => null, (e: Error) => e.message);
          if (accepted) expect(refusal, JSON.stringify(p)).toBeNull();
        }),
        { numRuns: 300 },
      );
    });
  }
});
