import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { provisioningJobTypes } from '../../functions/platform/provisioning/job-types.ts';
import { PROVISION_CONCURRENCY, provisioningConcurrencyKey } from '../../functions/platform/provisioning/resources.ts';
import {
  claimJobs, defineJobType, done, enqueue, enqueueBatch, JobRegistry, sampleJobTypes, typeAccess, ValidationError, type Sql,
} from '../../queue/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { expectSqlRefusal } from '../support/refusals.ts';

/**
 * Issue 14, item 1, in the engine: each job type declares who may enqueue it over the generic
 * routes (stored by the registry sync), and a type's own concurrency key is applied by enqueue
 * itself, on every path (SQL single and batch, TypeScript), so no caller can move a provisioning
 * job off its account's key or raise its limit.
 */

let db: TestDatabase;
const NOW = new Date('2026-04-01T12:00:00Z');

/** A type of this file with a declared key, and one with none (the default: internal). */
const perTenant = defineJobType({
  type: 'per_tenant',
  access: 'public',
  concurrency: { key: 'tenant:{tenant}:{region}', limit: 1 },
  payload: z.object({ tenant: z.string().min(1), region: z.string().min(1) }),
  run: async () => done(),
});
const undeclared = defineJobType({ type: 'undeclared', payload: z.object({}), run: async () => done() });

beforeAll(async () => {
  db = await createTestDatabase();
  // the real provisioning types (unconfigured: their steps fail at once, their declarations are the app's)
  await new JobRegistry([...sampleJobTypes, ...(await provisioningJobTypes({})), perTenant, undeclared]).sync(db.sql);
});

const refusedFromSql = (act: () => Promise<unknown>, column: string, message: RegExp) => expectSqlRefusal(db.sql, act, column, message);

const dbPayload = (accountId: string, name = 'main') => ({ accountId, serviceId: 'svc-1', name, size: 'db-s-1vcpu-1gb', region: 'nyc3' });

describe('the registry sync stores who may enqueue each type', () => {
  it('the samples are public, a type that says nothing is internal, and a refused route is named', async () => {
    const rows = await db.sql`select type, access, enqueue_via, concurrency_key, concurrency_limit from worker.job_types order by type`;
    const byType = Object.fromEntries(rows.map((r) => [r.type, r]));
    for (const t of ['uppercase', 'countdown', 'fail']) expect(byType[t]).toMatchObject({ access: 'public', concurrency_key: null });
    expect(byType.undeclared).toMatchObject({ access: 'internal', enqueue_via: null, concurrency_key: null, concurrency_limit: null });
    expect(byType.provision_db).toMatchObject({ access: 'internal', enqueue_via: 'POST /v1/databases', concurrency_key: 'provision:{accountId}', concurrency_limit: PROVISION_CONCURRENCY });
    expect(byType.provision_cluster).toMatchObject({ access: 'internal', enqueue_via: 'POST /v1/clusters', concurrency_key: 'provision:{accountId}' });
    const access = await typeAccess(db.sql, ['uppercase', 'provision_db', 'undeclared', 'no_such_type', 'uppercase']);
    expect(Object.fromEntries(access)).toEqual({
      uppercase: { access: 'public', enqueueVia: null },
      provision_db: { access: 'internal', enqueueVia: 'POST /v1/databases' },
      undeclared: { access: 'internal', enqueueVia: null },
    });
  });

  it('a type that stops declaring itself public is internal again at the next sync', async () => {
    const scratch = await createTestDatabase();
    const open = defineJobType({ type: 'flip', access: 'public', payload: z.object({}), run: async () => done() });
    await new JobRegistry([open]).sync(scratch.sql);
    await new JobRegistry([{ ...open, access: undefined }]).sync(scratch.sql);
    const [row] = await scratch.sql`select access from worker.job_types where type = 'flip'`;
    expect(row!.access).toBe('internal');
  });

  it('a declaration the table would refuse is refused where it is written, naming the type', () => {
    const base = { payload: z.object({}), run: async () => done() };
    expect(() => defineJobType({ ...base, type: 'a', concurrency: { key: '{accountId}', limit: 2 } })).toThrow(/job type a: concurrency.key .*literal text/);
    expect(() => defineJobType({ ...base, type: 'b', concurrency: { key: 'k:{a', limit: 2 } })).toThrow(/job type b: concurrency.key/);
    expect(() => defineJobType({ ...base, type: 'c', concurrency: { key: 'k:{a}', limit: 0 } })).toThrow(/job type c: concurrency.limit/);
    expect(() => defineJobType({ ...base, type: 'd', access: 'everyone' as never })).toThrow(/job type d: access/);
    expect(() => new JobRegistry([{ ...base, type: 'e', concurrency: { key: '', limit: 1 } }])).toThrow(/job type e: concurrency.key/);
  });
});

describe("a type's own concurrency key", () => {
  it('is derived from the payload on every path, whatever the caller leaves out', async () => {
    const [single] = await db.sql`select * from worker.enqueue_job(type => 'provision_db', payload => ${db.sql.json(dbPayload('acct-a', 'one'))})`;
    expect(single).toMatchObject({ concurrency_key: 'provision:acct-a', concurrency_limit: PROVISION_CONCURRENCY });
    const ts = await enqueue(db.sql, { type: 'provision_db', payload: dbPayload('acct-a', 'two') }, { now: NOW });
    expect(ts.job).toMatchObject({ concurrencyKey: 'provision:acct-a' });
    // the batch without keys (one insert) and with them (row by row) both prepare through prepare_enqueue
    const plain = await enqueueBatch(db.sql, [{ type: 'provision_db', payload: dbPayload('acct-b') }, { type: 'uppercase', payload: { text: 'x' } }], { now: NOW });
    expect(plain.map((r) => r.job.concurrencyKey)).toEqual(['provision:acct-b', null]);
    const keyed = await enqueueBatch(db.sql, [{ type: 'provision_cluster', payload: { accountId: 'acct-c', name: 'prod', region: 'nyc3', controlPlanes: 1, workers: 1, size: 's-2vcpu-4gb' }, submitKey: 'scopes-cluster-1' }], { now: NOW });
    expect(keyed[0]!.job.concurrencyKey).toBe('provision:acct-c');
    const [limits] = await db.sql`select array_agg(distinct concurrency_limit) as l from worker.jobs where type like 'provision_%'`;
    expect(limits!.l).toEqual([PROVISION_CONCURRENCY]);
    // two placeholders, and a value holding a placeholder is not expanded again
    const multi = await enqueue(db.sql, { type: 'per_tenant', payload: { tenant: '{region}', region: 'eu' } }, { now: NOW });
    expect(multi.job.concurrencyKey).toBe('tenant:{region}:eu');
    // the route's own key (it restates the derived one) is accepted
    const restated = await enqueue(db.sql, {
      type: 'provision_db', payload: dbPayload('acct-a', 'three'),
      concurrencyKey: provisioningConcurrencyKey('acct-a'), concurrencyLimit: PROVISION_CONCURRENCY,
    }, { now: NOW });
    expect(restated.job.concurrencyKey).toBe('provision:acct-a');
    await db.sql`delete from worker.jobs`;
  });

  it("a caller's other key or limit is refused (SB400 naming concurrencyKey) over SQL, single and batch, and nothing is written", async () => {
    const payload = db.sql.json(dbPayload('acct-a'));
    const message = /job type "provision_db" sets its own concurrency key \(provision:\{accountId\}, at most 2 at once\): leave concurrencyKey and concurrencyLimit out/;
    await refusedFromSql(() => db.sql`select * from worker.enqueue_job(type => 'provision_db', payload => ${payload}, concurrency_key => 'mine', concurrency_limit => 100)`, 'concurrencyKey', message);
    // the right key with a higher limit, or another account's key
    await refusedFromSql(() => db.sql`select * from worker.enqueue_job(type => 'provision_db', payload => ${payload}, concurrency_key => 'provision:acct-a', concurrency_limit => 100)`, 'concurrencyKey', message);
    await refusedFromSql(() => db.sql`select * from worker.enqueue_job(type => 'provision_db', payload => ${payload}, concurrency_key => 'provision:acct-z', concurrency_limit => 2)`, 'concurrencyKey', message);
    const fine = { type: 'provision_db', payload: dbPayload('acct-a', 'ok') };
    const bad = { type: 'provision_db', payload: dbPayload('acct-a'), concurrencyKey: 'mine', concurrencyLimit: 100 };
    await refusedFromSql(() => db.sql`select * from worker.enqueue_jobs(${db.sql.json([fine, bad])})`, 'jobs[1].concurrencyKey', /^jobs\[1\]: job type "provision_db" sets its own/);
    await refusedFromSql(() => db.sql`select * from worker.enqueue_jobs(${db.sql.json([fine, { ...bad, submitKey: 'k-1' }])})`, 'jobs[1].concurrencyKey', /^jobs\[1\]: job type "provision_db" sets its own/);
    const error = await enqueue(db.sql, bad).catch((e) => e);
    expect(error).toBeInstanceOf(ValidationError);
    expect(error.field).toBe('concurrencyKey');
  });

  it("a key of that shape is refused on any other type: it would take the account's provisioning slots", async () => {
    await refusedFromSql(
      () => db.sql`select * from worker.enqueue_job(type => 'countdown', payload => '{"n":1}', concurrency_key => 'provision:acct-a', concurrency_limit => 100)`,
      'concurrencyKey',
      /concurrency key "provision:acct-a" is reserved for job type\(s\) provision_cluster, provision_db/,
    );
    await refusedFromSql(
      () => db.sql`select * from worker.enqueue_jobs(${db.sql.json([{ type: 'uppercase', payload: { text: 'x' }, concurrencyKey: 'tenant:t1:eu', concurrencyLimit: 5 }])})`,
      'jobs[0].concurrencyKey',
      /reserved for job type\(s\) per_tenant/,
    );
    // LIKE's own characters in a key are literal: 'provision_' does not match 'provision:'
    const other = await enqueue(db.sql, { type: 'countdown', payload: { n: 1 }, concurrencyKey: 'provision_acct-a', concurrencyLimit: 3 }, { now: NOW });
    expect(other.job.concurrencyKey).toBe('provision_acct-a');
    await db.sql`delete from worker.jobs`;
  });

  it('a payload without the field the key is made of is refused naming it', async () => {
    // per_tenant's schema requires the field, so the payload check names it first …
    await refusedFromSql(() => db.sql`select * from worker.enqueue_job(type => 'per_tenant', payload => '{"tenant":"t"}')`, 'payload.region', /payload.region is required/);
    // … and without a stored schema the key's own check does
    await db.sql`update worker.job_types set payload_schema = null where type = 'per_tenant'`;
    try {
      await refusedFromSql(() => db.sql`select * from worker.enqueue_job(type => 'per_tenant', payload => '{"tenant":"t","region":{"x":1}}')`, 'payload.region', /payload.region must be a non-empty string: it makes this job's concurrency key \(tenant:\{tenant\}:\{region\}\)/);
      await refusedFromSql(() => db.sql`select * from worker.enqueue_job(type => 'per_tenant', payload => '{"tenant":"","region":"eu"}')`, 'payload.tenant', /payload.tenant must be a non-empty string/);
    } finally {
      await new JobRegistry([perTenant]).sync(db.sql);
    }
  });

  it('holds the per-account provisioning limit when every caller passes its own key: at most 2 of an account run at once', async () => {
    // the attack: each job under its own key, so none waits for another
    for (let i = 0; i < 4; i++) {
      const attempt = db.sql`select * from worker.enqueue_job(type => 'provision_db', payload => ${db.sql.json(dbPayload('acct-limit', `db${i}x`))},
                                                              concurrency_key => ${`mine-${i}`}, concurrency_limit => 100)`;
      await expect(attempt).rejects.toMatchObject({ code: 'SB400', column_name: 'concurrencyKey' });
    }
    // what is accepted gets the account's key: four jobs of one account, two more of another
    for (let i = 0; i < 4; i++) await enqueue(db.sql, { type: 'provision_db', payload: dbPayload('acct-limit', `db${i}x`) }, { now: NOW });
    await enqueueBatch(db.sql, [0, 1].map((i) => ({ type: 'provision_cluster', payload: { accountId: 'acct-other', name: `c${i}x`, region: 'nyc3', controlPlanes: 1, workers: 1, size: 's-2vcpu-4gb' } })), { now: NOW });
    const claimed = await claimJobs(db.sql, { workerId: 'scopes-1', limit: 10, now: new Date(NOW.getTime() + 1000) });
    const perAccount = (acct: string) => claimed.filter((j) => (j.payload as { accountId: string }).accountId === acct).length;
    expect(perAccount('acct-limit')).toBe(PROVISION_CONCURRENCY);
    expect(perAccount('acct-other')).toBe(2);
    // a second claimer finds the account full
    const more = await claimJobs(db.sql, { workerId: 'scopes-2', limit: 10, now: new Date(NOW.getTime() + 2000) });
    expect(more.filter((j) => (j.payload as { accountId: string }).accountId === 'acct-limit')).toEqual([]);
    await db.sql`delete from worker.jobs`;
  });
});
