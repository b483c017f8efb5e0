import { beforeAll, describe, expect, it } from 'vitest';
import { createWorkerHarness, type WorkerHarness } from './support.ts';

/**
 * The Worker syncs its registry into worker.job_types (each type's payload schema with it), so
 * enqueue checks a payload before a job exists: a payload its type would refuse at run time is
 * a 400 naming the field, not a 201 and then a poison alert.
 */
let h: WorkerHarness;
beforeAll(async () => {
  h = await createWorkerHarness({ KICK_BUDGET_MS: '0' } as never);
  await h.sql`insert into worker.pool_capacity (pool, enabled, max_running_weight) values ('tiny', true, 7)`;
});

async function counts() {
  const [row] = await h.sql`select (select count(*)::int from worker.jobs) as jobs, (select count(*)::int from worker.job_history) as events`;
  return row;
}

async function refused(path: string, json: unknown, field: string, message: RegExp) {
  const before = await counts();
  const res = await h.request(path, { method: 'POST', json, token: 'enqueue' });
  const body = (await res.json()) as { error: { code: string; message: string; field?: string } };
  expect(res.status).toBe(400);
  expect(body.error).toMatchObject({ code: 'invalid_input', field });
  expect(body.error.message).toMatch(message);
  expect(await counts()).toEqual(before);
}

describe('POST /v1/jobs checks the payload against its type', () => {
  it('refuses a wrong type, a missing payload and an oversized text, naming the field', async () => {
    await refused('/v1/jobs', { type: 'uppercase', payload: { text: 1 } }, 'payload.text', /payload\.text must be of type string/);
    await refused('/v1/jobs', { type: 'uppercase' }, 'payload.text', /payload\.text is required/);
    await refused('/v1/jobs', { type: 'uppercase', payload: { text: 'x'.repeat(250 * 1024) } }, 'payload.text', /at most 65536 characters/);
    await refused('/v1/jobs', { type: 'countdown', payload: { n: -1 } }, 'payload.n', /payload\.n must be at least 0/);
    await refused('/v1/jobs/batch', { jobs: [{ type: 'uppercase', payload: { text: 'ok' } }, { type: 'uppercase', payload: { text: 1 } }] }, 'jobs[1].payload.text', /^jobs\[1\]: payload\.text/);
  });

  it('refuses a heavy job pinned to a pool that can never run it, naming weight', async () => {
    await refused('/v1/jobs', { type: 'uppercase', payload: { text: 'x' }, pool: 'tiny', weight: 'heavy' }, 'weight', /more than pool "tiny" can ever run/);
  });

  it('accepts a payload its type accepts', async () => {
    const res = await h.request('/v1/jobs', { method: 'POST', json: { type: 'uppercase', payload: { text: 'fine' }, delayMs: 3_600_000 }, token: 'enqueue' });
    expect(res.status).toBe(201);
  });

  it('applies the same check to plain SQL once the Worker has synced its types', async () => {
    const error = await h.sql`select * from worker.enqueue_job(type => 'uppercase', payload => '{"text": 1}'::jsonb)`.catch((e) => e);
    expect(error).toMatchObject({ code: 'SB400', column_name: 'payload.text' });
  });
});
