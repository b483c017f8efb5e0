import { beforeAll, describe, expect, it } from 'vitest';
import { countJobs, createWorkerHarness, type WorkerHarness } from './support.ts';

let h: WorkerHarness;
beforeAll(async () => {
  h = await createWorkerHarness();
});

type Json = Record<string, any>;
async function call(path: string, init: Parameters<WorkerHarness['request']>[1] = {}): Promise<{ status: number; body: Json }> {
  const res = await h.request(path, init);
  const text = await res.text();
  return { status: res.status, body: text.startsWith('{') ? JSON.parse(text) : { text } };
}

/** Runs `act` and checks it answered `status` with `code` (and `field`), writing no job and no event. */
async function expectRefused(act: () => Promise<{ status: number; body: Json }>, status: number, code: string, field?: string) {
  const before = await snapshot();
  const res = await act();
  expect(res.status).toBe(status);
  expect(res.body.error.code).toBe(code);
  if (field) expect(res.body.error.field).toBe(field);
  expect(typeof res.body.error.message).toBe('string');
  expect(await snapshot()).toEqual(before);
  return res;
}

async function snapshot() {
  const [row] = await h.sql`select (select count(*)::int from worker.jobs) as jobs, (select count(*)::int from worker.job_history) as events,
                                   (select coalesce(max(generation), 0)::int from worker.leader_lease) as gen,
                                   (select count(*)::int from worker.jobs where status = 'cancelled') as cancelled`;
  return row;
}

const post = (path: string, json?: unknown, token: 'admin' | 'enqueue' | 'metrics' | null = 'admin') => call(path, { method: 'POST', json, token });

describe('GET /healthz', () => {
  it('answers without a token', async () => {
    expect(await call('/healthz', { token: null })).toEqual({ status: 200, body: { ok: true } });
  });

  it('answers 503 when the database is unreachable', async () => {
    const res = await h.request('/healthz', { token: null });
    expect(res.status).toBe(200);
    const { createExecutionContext, waitOnExecutionContext } = await import('cloudflare:test');
    const worker = (await import('../../functions/index.ts')).default;
    const ctx = createExecutionContext();
    const down = await worker.fetch(new Request('http://w/healthz') as never, { ...h.env, HYPERDRIVE: { connectionString: 'postgres://u:p@127.0.0.1:1/none' } } as never, ctx);
    await waitOnExecutionContext(ctx);
    expect(down.status).toBe(503);
  });
});

describe('authentication', () => {
  it('refuses a missing or wrong token with 401 and a scope it lacks with 403', async () => {
    await expectRefused(() => post('/v1/jobs', { type: 'uppercase', payload: { text: 'x' } }, null), 401, 'unauthorized');
    await expectRefused(() => call('/v1/jobs', { method: 'POST', json: { type: 'uppercase' }, token: null, headers: { authorization: 'Bearer nope' } }), 401, 'unauthorized');
    await expectRefused(() => post('/v1/jobs', { type: 'uppercase', payload: { text: 'x' } }, 'metrics'), 403, 'forbidden');
    await expectRefused(() => call('/metrics', { token: 'enqueue' }), 403, 'forbidden');
  });

  it('refuses to run open when no token is configured', async () => {
    const open = await createWorkerHarness({ ADMIN_TOKEN: undefined, ENQUEUE_TOKEN: undefined, METRICS_TOKEN: undefined } as never);
    const res = await open.request('/v1/jobs', { method: 'POST', json: { type: 'uppercase', payload: { text: 'x' } }, token: null, headers: { authorization: 'Bearer anything' } });
    expect(res.status).toBe(503);
    expect(((await res.json()) as Json).error.code).toBe('not_configured');
    expect(await countJobs(open.sql)).toBe(0);
  });
});

describe('POST /v1/jobs', () => {
  it('enqueues (201), and answers a repeated submitKey with the same job (200, duplicate)', async () => {
    const first = await post('/v1/jobs', { type: 'uppercase', payload: { text: 'a' }, submitKey: 'api-1', delayMs: 60_000 }, 'enqueue');
    expect(first.status).toBe(201);
    expect(first.body.job).toMatchObject({ type: 'uppercase', status: 'queued', submitKey: 'api-1', priority: 50, attempts: 0, maxAttempts: 3 });
    expect(first.body.job).not.toHaveProperty('leaseToken');
    const again = await post('/v1/jobs', { type: 'uppercase', payload: { text: 'a' }, submitKey: 'api-1', delayMs: 60_000 }, 'enqueue');
    expect(again).toMatchObject({ status: 200, body: { duplicate: true, job: { id: first.body.job.id } } });
  });

  it('answers each kind of bad request with a 4xx naming the problem, writing nothing', async () => {
    await expectRefused(() => call('/v1/jobs', { method: 'POST', body: '{"type": "uppercase",', token: 'enqueue' }), 400, 'invalid_json');
    await expectRefused(() => post('/v1/jobs', { type: 'uppercase', priority: 'high' }), 400, 'invalid_input', 'priority');
    await expectRefused(() => post('/v1/jobs', { type: 'no_such_type' }), 400, 'invalid_input', 'type');
    await expectRefused(() => post('/v1/jobs', { payload: {} }), 400, 'invalid_input', 'type');
    await expectRefused(() => post('/v1/jobs', { type: 'uppercase', payload: [1] }), 400, 'invalid_input', 'payload');
    await expectRefused(() => post('/v1/jobs', { type: 'uppercase', maxAttempts: 0 }), 400, 'invalid_input', 'maxAttempts');
    await expectRefused(() => post('/v1/jobs', { type: 'uppercase', runAt: 'tomorrow' }), 400, 'invalid_input', 'runAt');
    await expectRefused(() => post('/v1/jobs', { type: 'uppercase', colour: 'red' }), 400, 'invalid_input', 'colour');
    await expectRefused(() => post('/v1/jobs', { type: 'uppercase', runAt: '2030-01-01T00:00:00Z', delayMs: 5 }), 400, 'invalid_input', 'delayMs');
    let deep: unknown = 'x';
    for (let i = 0; i < 40; i++) deep = { d: deep };
    await expectRefused(() => post('/v1/jobs', { type: 'uppercase', payload: deep }), 400, 'invalid_input');
    await expectRefused(() => post('/v1/jobs', { type: 'uppercase', payload: { text: 'x'.repeat(300_000) } }), 413, 'payload_too_large');
    await expectRefused(() => post('/v1/jobs', { type: 'uppercase', payload: { text: 'b' }, submitKey: 'api-1', delayMs: 60_000 }), 409, 'conflict', 'submitKey');
  });
});

describe('deadlineMs over HTTP', () => {
  it('enqueues with a deadline and its severity, answered as deadlineAt and deadlineSeverity, single and batch', async () => {
    const one = await post('/v1/jobs', { type: 'uppercase', payload: { text: 'late?' }, delayMs: 3_600_000, deadlineMs: 7_200_000, deadlineSeverity: 'critical' }, 'enqueue');
    expect(one.status).toBe(201);
    expect(one.body.job.deadlineSeverity).toBe('critical');
    expect(Date.parse(one.body.job.deadlineAt) - Date.parse(one.body.job.createdAt)).toBe(7_200_000);
    const batch = await post('/v1/jobs/batch', { jobs: [{ type: 'uppercase', payload: { text: 'a' }, delayMs: 60_000 }, { type: 'uppercase', payload: { text: 'b' }, delayMs: 60_000, deadlineMs: 1000 }] }, 'enqueue');
    expect(batch.status).toBe(201);
    expect(batch.body.jobs.map((j: Json) => [j.deadlineSeverity, j.deadlineAt === null])).toEqual([[null, true], ['warning', false]]);
    const read = await call(`/v1/jobs/${one.body.job.id}`, { token: 'enqueue' });
    expect(read.body.job).toMatchObject({ deadlineAt: one.body.job.deadlineAt, deadlineSeverity: 'critical' });
  });

  it('refuses a bad deadline with a 400 naming the field, writing nothing', async () => {
    await expectRefused(() => post('/v1/jobs', { type: 'uppercase', deadlineMs: 0 }), 400, 'invalid_input', 'deadlineMs');
    await expectRefused(() => post('/v1/jobs', { type: 'uppercase', deadlineMs: 2.5 }), 400, 'invalid_input', 'deadlineMs');
    await expectRefused(() => post('/v1/jobs', { type: 'uppercase', deadlineMs: 31 * 86_400_000 }), 400, 'invalid_input', 'deadlineMs');
    await expectRefused(() => post('/v1/jobs', { type: 'uppercase', deadlineMs: 1000, deadlineSeverity: 'p1' }), 400, 'invalid_input', 'deadlineSeverity');
    // a severity with no deadline: the engine's refusal (uppercase declares none)
    const res = await expectRefused(() => post('/v1/jobs', { type: 'uppercase', payload: { text: 'x' }, deadlineSeverity: 'critical' }), 400, 'invalid_input', 'deadlineSeverity');
    expect(res.body.error.message).toMatch(/deadlineSeverity needs a deadline/);
    await expectRefused(() => post('/v1/jobs/batch', { jobs: [{ type: 'uppercase', payload: { text: 'x' } }, { type: 'uppercase', payload: { text: 'x' }, deadlineSeverity: 'critical' }] }), 400, 'invalid_input', 'jobs[1].deadlineSeverity');
    await expectRefused(() => post('/v1/jobs/batch', { jobs: [{ type: 'uppercase', deadlineMs: -1 }] }), 400, 'invalid_input', 'jobs.0.deadlineMs');
  });
});

describe('POST /v1/jobs/batch', () => {
  it('enqueues up to 1000 jobs atomically', async () => {
    const jobs = Array.from({ length: 1000 }, (_, i) => ({ type: 'uppercase', payload: { text: `b${i}` }, delayMs: 3_600_000 }));
    const res = await post('/v1/jobs/batch', { jobs }, 'enqueue');
    expect(res.status).toBe(201);
    expect(res.body.jobs).toHaveLength(1000);
  });

  it('refuses a batch with one bad job, or too many, writing nothing', async () => {
    await expectRefused(() => post('/v1/jobs/batch', { jobs: [{ type: 'uppercase', payload: { text: 'ok' } }, { type: 'nope' }] }), 400, 'invalid_input', 'jobs[1].type');
    await expectRefused(() => post('/v1/jobs/batch', { jobs: [{ type: 'uppercase' }, { type: 'uppercase', priority: -1 }] }), 400, 'invalid_input', 'jobs.1.priority');
    await expectRefused(() => post('/v1/jobs/batch', { jobs: Array.from({ length: 1001 }, () => ({ type: 'uppercase' })) }), 400, 'invalid_input', 'jobs');
    await expectRefused(() => post('/v1/jobs/batch', { jobs: [] }), 400, 'invalid_input', 'jobs');
  });
});

describe('reading jobs', () => {
  it('GET /v1/jobs/:id answers the job with its events, or 404', async () => {
    const { body } = await post('/v1/jobs', { type: 'uppercase', payload: { text: 'read me', apiToken: 'canary-secret-1' } });
    const got = await call(`/v1/jobs/${body.job.id}`, { token: 'enqueue' });
    expect(got.status).toBe(200);
    expect(got.body.job).toMatchObject({ id: body.job.id, status: 'done', result: { text: 'READ ME' } });
    expect(got.body.job.payload.apiToken).toBe('[redacted]');
    expect(JSON.stringify(got.body)).not.toContain('canary-secret-1');
    expect(got.body.events.map((e: Json) => e.kind)).toEqual(['enqueued', 'claimed', 'done']);
    expect((await call('/v1/jobs/00000000-0000-4000-8000-000000000000')).status).toBe(404);
    expect((await call('/v1/jobs/not-a-uuid')).body.error.code).toBe('not_found');
  });

  it('GET /v1/jobs/:id answers a parent with its children (results redacted) and a child with its parentId', async () => {
    const { claimJobs, spawn, spawnChildren } = await import('../../queue/index.ts');
    const { body } = await post('/v1/jobs', { type: 'countdown', payload: { n: 1 }, delayMs: 3_600_000 });
    await h.sql`update worker.jobs set run_at = now() where id = ${body.job.id}`;
    const [claimed] = await claimJobs(h.sql, { workerId: 'api-test', limit: 1, types: ['countdown'] });
    expect(claimed!.id).toBe(body.job.id);
    await spawnChildren(h.sql, claimed!, spawn([
      { type: 'uppercase', payload: { text: 'a' }, delayMs: 3_600_000 },
      { type: 'uppercase', payload: { text: 'b' }, delayMs: 3_600_000 },
    ], { next: 'joined', join: 'first' }));
    const [first] = await h.sql`select id from worker.jobs where parent_id = ${body.job.id} order by id limit 1`;
    await h.sql`select worker.fail_job(${first!.id}::uuid, 'gave up')`;
    const parent = await call(`/v1/jobs/${body.job.id}`, { token: 'enqueue' });
    expect(parent.body).toMatchObject({ parentId: null, children: { waitNo: 1, join: 'first', need: 1, total: 2, ended: 1, created: 2, nextStep: 'joined' } });
    expect(parent.body.children.children.map((c: Json) => [c.type, c.status, c.lastError])).toEqual([['uppercase', 'failed', 'gave up'], ['uppercase', 'queued', null]]);
    expect(parent.body.job).toMatchObject({ step: 'joined', status: 'queued' });
    const child = await call(`/v1/jobs/${first!.id}`, { token: 'enqueue' });
    expect(child.body).toMatchObject({ parentId: body.job.id, children: null });
    await h.sql`delete from worker.child_joins where parent_id = ${body.job.id}`;
    await h.sql`delete from worker.jobs where id = ${body.job.id} or parent_id = ${body.job.id}`;
  });

  it('GET /v1/jobs lists newest first with a keyset cursor, and refuses bad filters', async () => {
    for (let i = 0; i < 5; i++) await post('/v1/jobs', { type: 'countdown', payload: { n: 1 }, delayMs: 3_600_000 });
    const page1 = await call('/v1/jobs?type=countdown&limit=3');
    expect(page1.status).toBe(200);
    expect(page1.body.jobs).toHaveLength(3);
    const page2 = await call(`/v1/jobs?type=countdown&limit=3&cursor=${page1.body.nextCursor}`);
    expect(page2.body.jobs).toHaveLength(2);
    expect(page2.body.nextCursor).toBeNull();
    const ids = [...page1.body.jobs, ...page2.body.jobs].map((j: Json) => j.id);
    expect(new Set(ids).size).toBe(5);
    const created = [...page1.body.jobs, ...page2.body.jobs].map((j: Json) => j.createdAt);
    expect([...created].sort().reverse()).toEqual(created);
    // the cursor walks the primary key: ids are UUIDv7, so string order is creation order
    expect([...ids].sort().reverse()).toEqual(ids);
    expect((await call('/v1/jobs?status=queued&type=countdown')).body.jobs).toHaveLength(5);
    await expectRefused(() => call('/v1/jobs?status=sleeping'), 400, 'invalid_input', 'status');
    await expectRefused(() => call('/v1/jobs?cursor=garbage'), 400, 'invalid_input', 'cursor');
    await expectRefused(() => call('/v1/jobs?limit=0'), 400, 'invalid_input', 'limit');
    await expectRefused(() => call('/v1/jobs?colour=red'), 400, 'invalid_input');
  });
});

describe('manual operations', () => {
  it('cancel, retry, fail, reschedule, priority and release answer 200 with the job; 404 and 409 where they must', async () => {
    const queued = (await post('/v1/jobs', { type: 'uppercase', payload: { text: 'later' }, delayMs: 3_600_000 })).body.job;
    expect((await post(`/v1/jobs/${queued.id}/priority`, { priority: 10 })).body.job.priority).toBe(10);
    const when = '2031-01-01T00:00:00.000Z';
    expect((await post(`/v1/jobs/${queued.id}/reschedule`, { runAt: when })).body.job.runAt).toBe(when);
    expect((await post(`/v1/jobs/${queued.id}/cancel`, { reason: 'changed my mind' })).body.job).toMatchObject({ status: 'cancelled', lastError: 'changed my mind' });
    await expectRefused(() => post(`/v1/jobs/${queued.id}/cancel`), 409, 'conflict');
    const retried = await post(`/v1/jobs/${queued.id}/retry`);
    expect(retried.status).toBe(200);
    expect(retried.body.job.attempts).toBe(0);

    const other = (await post('/v1/jobs', { type: 'uppercase', payload: { text: 'doomed' }, delayMs: 3_600_000 })).body.job;
    await expectRefused(() => post(`/v1/jobs/${other.id}/fail`, {}), 400, 'invalid_input', 'reason');
    expect((await post(`/v1/jobs/${other.id}/fail`, { reason: 'bad input upstream' })).body.job).toMatchObject({ status: 'failed', lastError: 'bad input upstream' });
    await expectRefused(() => post(`/v1/jobs/${other.id}/reschedule`, { delayMs: 10 }), 409, 'conflict');
    await expectRefused(() => post(`/v1/jobs/${other.id}/release`), 409, 'conflict');
    await expectRefused(() => post(`/v1/jobs/${other.id}/priority`, { priority: 5000 }), 400, 'invalid_input', 'priority');
    await expectRefused(() => post('/v1/jobs/00000000-0000-4000-8000-000000000000/cancel'), 404, 'not_found');
    await expectRefused(() => post(`/v1/jobs/${other.id}/retry`, undefined, 'enqueue'), 403, 'forbidden');
    await expectRefused(() => post(`/v1/jobs/${other.id}/cancel`, { reason: 1 }), 400, 'invalid_input', 'reason');

    // a job of another pool: this Worker's kick leaves it alone, so it can be claimed here
    await post('/v1/jobs', { type: 'uppercase', payload: { text: 'elsewhere' }, pool: 'elsewhere' });
    const [running] = await h.sql`select * from worker.claim_jobs('api-test', 'elsewhere', 1)`;
    expect(running).toBeDefined();
    const released = await post(`/v1/jobs/${running!.id}/release`);
    expect(released.status).toBe(200);
  });

  it('POST /v1/leader/release expires the lease; POST /v1/maintenance/rescue answers counts', async () => {
    await h.sql`select * from worker.claim_leader_lease('default')`;
    const res = await post('/v1/leader/release');
    expect(res).toEqual({ status: 200, body: { released: true, previousHolder: 'default' } });
    const [lease] = await h.sql`select expires_at < now() as expired from worker.leader_lease`;
    expect(lease!.expired).toBe(true);
    await expectRefused(() => post('/v1/leader/release', undefined, 'enqueue'), 403, 'forbidden');
    expect((await post('/v1/maintenance/rescue')).body).toEqual({ requeued: 0, failed: 0, oomKilled: 0 });
  });

  it('POST /v1/tick runs the tick now: takes the lease, runs the maintenance and drains what is due', async () => {
    await h.sql`update worker.leader_lease set expires_at = now() - interval '1 second'`;
    const { job } = (await post('/v1/jobs', { type: 'countdown', payload: { n: 2 }, delayMs: 3_600_000 })).body;
    await h.sql`update worker.jobs set run_at = now() where id = ${job.id}`; // due, and no kick ran it
    await expectRefused(() => post('/v1/tick', undefined, 'enqueue'), 403, 'forbidden');
    const res = await post('/v1/tick');
    expect(res.status).toBe(200);
    expect(res.body.leader).toMatchObject({ outcome: 'acquired', holder: 'default' });
    expect(Object.keys(res.body.maintenance)).toEqual(expect.arrayContaining(['rescued', 'stuck', 'pruned', 'eventsRolledUp']));
    expect(res.body.failed).toEqual([]);
    // the countdown's three steps, beside whatever the maintenance's backfilled cron slots made due
    expect(res.body.steps.claimed).toBeGreaterThanOrEqual(3);
    expect(res.body.steps.continued).toBeGreaterThanOrEqual(2);
    const [row] = await h.sql`select status from worker.jobs where id = ${job.id}`;
    expect(row!.status).toBe('done');
    // a second tick renews the lease it holds
    expect((await post('/v1/tick')).body.leader.outcome).toBe('renewed');
  });
});

describe('GET /metrics', () => {
  it('answers Prometheus text for a metrics token', async () => {
    const res = await h.request('/metrics', { token: 'metrics' });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/plain');
    const text = await res.text();
    expect(text).toMatch(/^# HELP starbase_queue_depth /m);
    expect(text).toMatch(/^starbase_queue_depth\{status="done"\} \d+$/m);
  });
});

describe('unknown routes', () => {
  it('answers 404 in the error shape', async () => {
    const res = await call('/v2/nothing');
    expect(res).toMatchObject({ status: 404, body: { error: { code: 'not_found' } } });
  });
});
