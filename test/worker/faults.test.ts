import { createExecutionContext, createScheduledController, waitOnExecutionContext } from 'cloudflare:test';
import { beforeAll, describe, expect, it } from 'vitest';
import worker from '../../functions/index.ts';
import { installFaults } from '../support/faults.ts';
import { createWorkerHarness, TOKENS, type TestEnv, type WorkerHarness } from './support.ts';

/**
 * The Worker when its database fails: unreachable (nothing listens), or a connection cut while a
 * request's statement runs. It answers at once with a clear 5xx — 503 on /healthz, 503
 * `database_unavailable` with Retry-After on the API — never hangs, never writes half a request,
 * and the tick fails with the database's error instead of pretending it ran.
 */

let h: WorkerHarness;
let down: TestEnv;
beforeAll(async () => {
  h = await createWorkerHarness();
  // nothing listens on port 1: every connection is refused
  down = { ...h.env, HYPERDRIVE: { connectionString: 'postgres://u:p@127.0.0.1:1/none' } } as unknown as TestEnv;
});

async function fetchWith(env: TestEnv, path: string, init: RequestInit & { token?: keyof typeof TOKENS | null } = {}) {
  const { token = 'admin', ...rest } = init;
  const headers = new Headers(rest.headers);
  if (token) headers.set('authorization', `Bearer ${TOKENS[token]}`);
  const ctx = createExecutionContext();
  const started = Date.now();
  const res = (await worker.fetch(new Request(`http://worker.test${path}`, { ...rest, headers }) as never, env, ctx)) as unknown as Response;
  await waitOnExecutionContext(ctx);
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text.startsWith('{') ? JSON.parse(text) : text, ms: Date.now() - started };
}

const json = (body: unknown): RequestInit => ({ method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });

describe('an unreachable database', () => {
  it('/healthz answers 503 at once', async () => {
    const res = await fetchWith(down, '/healthz', { token: null });
    expect(res.status).toBe(503);
    expect(res.body).toMatchObject({ ok: false, error: { code: 'database_unreachable' } });
    expect(res.ms).toBeLessThan(5_000);
  });

  it('every API route that needs the database answers 503 database_unavailable with Retry-After, not a 500 or a hang', async () => {
    const id = '00000000-0000-4000-8000-000000000000';
    const calls: Array<[string, RequestInit]> = [
      ['/v1/jobs', json({ type: 'uppercase', payload: { text: 'x' } })],
      ['/v1/jobs/batch', json({ jobs: [{ type: 'uppercase' }] })],
      ['/v1/jobs', {}],
      [`/v1/jobs/${id}`, {}],
      [`/v1/jobs/${id}/cancel`, json({})],
      [`/v1/jobs/${id}/retry`, json({})],
      [`/v1/jobs/${id}/fail`, json({ reason: 'r' })],
      [`/v1/jobs/${id}/reschedule`, json({ delayMs: 5 })],
      [`/v1/jobs/${id}/priority`, json({ priority: 5 })],
      [`/v1/jobs/${id}/release`, json({})],
      ['/v1/leader', {}],
      ['/v1/leader/release', { method: 'POST' }],
      ['/v1/maintenance/rescue', { method: 'POST' }],
      ['/metrics', {}],
    ];
    for (const [path, init] of calls) {
      const res = await fetchWith(down, path, init);
      expect({ path, status: res.status, code: res.body?.error?.code }).toEqual({ path, status: 503, code: 'database_unavailable' });
      expect(res.headers.get('retry-after')).toBe('5');
      expect(res.ms).toBeLessThan(5_000);
    }
  });

  it('still checks the token first: a bad one is a 401, whatever the database does', async () => {
    const res = await fetchWith(down, '/v1/jobs', { ...json({ type: 'uppercase' }), token: null, headers: { authorization: 'Bearer wrong' } });
    expect(res.status).toBe(401);
  });

  it('a tick fails with the connection error, promptly, and the next tick with the database back runs', async () => {
    const started = Date.now();
    const failed = await worker.scheduled(createScheduledController({ cron: '* * * * *', scheduledTime: new Date() }), down).then(
      () => null,
      (e: Error & { code?: string }) => e,
    );
    expect(failed).not.toBeNull();
    expect(failed!.code).toBe('DATABASE_UNREACHABLE');
    expect(failed!.message).toMatch(/database connection failed/);
    expect(Date.now() - started).toBeLessThan(5_000);

    await h.sql`select worker.enqueue_job('uppercase', '{"text": "after the outage"}')`;
    await h.trigger('* * * * *');
    const [job] = await h.sql`select status from worker.jobs where payload->>'text' = 'after the outage'`;
    expect(job!.status).toBe('done');
  });
});

describe('a connection cut while a request runs', () => {
  it('a batch enqueue cut halfway answers 503 and writes none of it; the next request goes through', async () => {
    const [{ id: waiting }] = (await h.sql`select id from worker.enqueue_job('uppercase', '{"text": "old"}', dedupe_key => 'w-5', delay_ms => 3600000)`) as unknown as [{ id: string }];
    const before = await h.sql`select (select count(*)::int from worker.jobs) as jobs, (select count(*)::int from worker.job_history) as events`;
    // a row lock on the waiting job of key w-5: the batch blocks there after writing its first five jobs
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let locked!: () => void;
    const isLocked = new Promise<void>((r) => (locked = r));
    const holder = h.sql.begin(async (tx) => {
      await tx`select 1 from worker.jobs where id = ${waiting} for update`;
      locked();
      await released;
    });
    await isLocked;
    const jobs = Array.from({ length: 10 }, (_, i) => ({ type: 'uppercase', payload: { text: `cut ${i}` }, dedupeKey: `w-${i}`, delayMs: 3_600_000 }));
    const pending = fetchWith(h.env, '/v1/jobs/batch', json({ jobs }));
    let pid: number | undefined;
    for (let i = 0; i < 500 && pid === undefined; i++) {
      const [row] = await h.sql`select pid from pg_stat_activity where datname = current_database() and application_name like 'starbase-worker %' and wait_event_type = 'Lock'`;
      pid = row?.pid as number | undefined;
      if (pid === undefined) await new Promise((r) => setTimeout(r, 10));
    }
    expect(pid).toBeDefined();
    await h.sql`select pg_terminate_backend(${pid!})`;
    const res = await pending;
    release();
    await holder;
    expect(res.status).toBe(503);
    expect(res.body.error.code).toBe('database_unavailable');
    const after = await h.sql`select (select count(*)::int from worker.jobs) as jobs, (select count(*)::int from worker.job_history) as events`;
    expect(after).toEqual(before);

    const again = await fetchWith(h.env, '/v1/jobs/batch', json({ jobs }));
    expect(again.status).toBe(201);
    expect(again.body.jobs).toHaveLength(10);
    const [old] = await h.sql`select status, superseded_by from worker.jobs where id = ${waiting}`;
    expect(old).toMatchObject({ status: 'cancelled' });
  });
});

describe('contention while a request runs', () => {
  it('a deadlock or lock timeout in a request answers 503 database_busy with Retry-After and writes nothing; sent again it goes through', async () => {
    const [{ id }] = (await h.sql`select id from worker.enqueue_job('uppercase', '{"text": "to cancel"}', delay_ms => 3600000)`) as unknown as [{ id: string }];
    const faults = await installFaults(h.sql);
    try {
      for (const code of ['40P01', '55P03']) {
        await faults.arm({ count: 1, codes: [code] });
        const res = await fetchWith(h.env, `/v1/jobs/${id}/cancel`, json({ reason: 'contention' }));
        expect({ code, status: res.status, body: res.body?.error?.code }).toEqual({ code, status: 503, body: 'database_busy' });
        expect(res.body.error.message).toMatch(/nothing was written/);
        expect(res.headers.get('retry-after')).toBe('5');
        expect(await faults.raised()).toBe(1);
        const [row] = await h.sql`select status from worker.jobs where id = ${id}`;
        expect(row!.status).toBe('queued');
      }
      await faults.disarm();
      const res = await fetchWith(h.env, `/v1/jobs/${id}/cancel`, json({ reason: 'contention' }));
      expect(res.status).toBe(200);
      const [row] = await h.sql`select status from worker.jobs where id = ${id}`;
      expect(row!.status).toBe('cancelled');
    } finally {
      await faults.remove();
    }
  });
});
