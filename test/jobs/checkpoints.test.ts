import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { parseCheckpoint } from '../../functions/platform/checkpoint.ts';
import { cleanupJob } from '../../functions/platform/cleanup/cleanup.ts';
import { enqueue, JobRegistry, PermanentError, runSteps } from '../../queue/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';

/**
 * Issue 15, item 4: a platform job's checkpoint is parsed with its schema at the step's start. One
 * that does not parse (not written by this job's code) fails the job at once, naming the field,
 * instead of a cast letting a wrong value reach a provider call.
 */

const NOW = new Date('2026-12-10T12:00:00Z');
let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
});

describe('typed checkpoints', () => {
  it('names the first field that does not parse, as a permanent error', () => {
    const schema = z.looseObject({ sweeps: z.record(z.string(), z.object({ count: z.number() })).optional() });
    expect(parseCheckpoint('cleanup', schema, { sweeps: { a: { count: 2 } }, other: 'kept' })).toEqual({ sweeps: { a: { count: 2 } }, other: 'kept' });
    const bad = () => parseCheckpoint('cleanup', schema, { sweeps: { a: { count: 'many' } } });
    expect(bad).toThrow(PermanentError);
    expect(bad).toThrow(/^cleanup checkpoint field sweeps\.a\.count is malformed/);
  });

  it('a cleanup job whose checkpoint does not parse fails on its first attempt, naming the field', async () => {
    const nothing = { listTagged: async () => [], delete: async () => {} };
    const registry = new JobRegistry([cleanupJob({ inventory: nothing, logs: { list: async () => [], delete: async () => {} } })]);
    await registry.sync(db.sql);
    const { job } = await enqueue(db.sql, { type: 'cleanup', payload: { sweep: 'orphaned_resources' } }, { now: NOW });
    await db.sql`update worker.jobs set checkpoint = ${db.sql.json({ sweeps: { orphaned_resources: { count: 'many', actions: [], omitted: 0 } } })} where id = ${job.id}`;
    await runSteps({ sql: db.sql, registry, workerId: 'checkpoint-test', clock: () => NOW });
    const [row] = await db.sql`select status, attempts, last_error from worker.jobs where id = ${job.id}`;
    expect(row).toMatchObject({ status: 'failed', attempts: 1 });
    expect(row!.last_error).toMatch(/^cleanup checkpoint field sweeps\.orphaned_resources\.count is malformed/);
  });
});
