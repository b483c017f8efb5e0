import { beforeAll, describe, expect, it } from 'vitest';
import { createWorkerHarness, type WorkerHarness } from './support.ts';

let h: WorkerHarness;
beforeAll(async () => {
  h = await createWorkerHarness();
  await h.sql`insert into worker.job_types (type) values ('bulk_http'), ('bulk_http_cancel')`;
});

type Json = Record<string, any>;
async function post(path: string, json?: unknown, token: 'admin' | 'enqueue' = 'admin'): Promise<{ status: number; body: Json }> {
  const res = await h.request(path, { method: 'POST', json, token });
  return { status: res.status, body: (await res.json()) as Json };
}

async function failed(n: number, error: string): Promise<string[]> {
  const rows = await h.sql<{ id: string }[]>`
    insert into worker.jobs (type, status, attempts, last_error, started_at, finished_at)
    select 'bulk_http', 'failed', 3, ${error} || ' ' || i, now(), now() from generate_series(1, ${n}) i returning id`;
  return rows.map((r) => r.id);
}

const statusCount = async (status: string) =>
  (await h.sql<{ n: number }[]>`select count(*)::int as n from worker.jobs where type = 'bulk_http' and status = ${status}`)[0]!.n;

describe('operations in bulk over HTTP', () => {
  it('lists the dead-letter groups, counts a group in a dry run, then retries it', async () => {
    await failed(3, 'provider said 503 for droplet');
    await failed(2, 'invalid region');
    const res = await h.request('/v1/dead-letters?type=bulk_http', { token: 'admin' });
    expect(res.status).toBe(200);
    const { groups } = (await res.json()) as Json;
    const group = groups.find((g: Json) => g.error === 'provider said <n> for droplet <n>');
    expect(group).toMatchObject({ type: 'bulk_http', jobs: 3, failed: 3, oomKilled: 0 });

    const filter = { type: 'bulk_http', fingerprint: group.fingerprint };
    expect(await post('/v1/jobs/bulk/retry', { filter, dryRun: true })).toEqual({
      status: 200, body: { dryRun: true, matched: 3, requeued: 0, skipped: 0, batches: 0, nextCursor: null },
    });
    expect(await statusCount('queued')).toBe(0);
    expect((await post('/v1/jobs/bulk/retry', { filter })).body).toMatchObject({ matched: 3, requeued: 3, nextCursor: null });
    expect(await statusCount('queued')).toBe(3);
  });

  it('refuses an empty filter, a bad field and a non-admin token, writing nothing', async () => {
    const before = await statusCount('failed');
    expect(await post('/v1/jobs/bulk/retry', { filter: {} })).toMatchObject({ status: 400, body: { error: { field: 'filter' } } });
    expect(await post('/v1/jobs/bulk/retry', { filter: { fingerprint: 'xyz' } })).toMatchObject({ status: 400, body: { error: { field: 'filter.fingerprint' } } });
    expect(await post('/v1/jobs/bulk/cancel', { filter: { status: 'failed' } })).toMatchObject({ status: 400, body: { error: { field: 'filter.status' } } });
    expect((await post('/v1/jobs/bulk/retry', { filter: { all: true } }, 'enqueue')).status).toBe(403);
    expect(await statusCount('failed')).toBe(before);
  });

  it('cancels by filter; a request walks at most maxJobs and answers where to go on', async () => {
    await h.sql`insert into worker.jobs (type, run_at) select 'bulk_http_cancel', now() + interval '1 hour' from generate_series(1, 4)`;
    await h.sql`insert into worker.jobs (type, run_at, started_at, step) values ('bulk_http_cancel', now() + interval '1 hour', now(), 'poll')`;
    const first = await post('/v1/jobs/bulk/cancel', { filter: { type: 'bulk_http_cancel' }, batchSize: 2, maxJobs: 2, reason: 'bad release' });
    expect(first.body).toMatchObject({ matched: 2, cancelled: 2, cancelRequested: 0 });
    expect(first.body.nextCursor).toEqual(expect.any(String));
    const rest = await post('/v1/jobs/bulk/cancel', { filter: { type: 'bulk_http_cancel' }, batchSize: 2, cursor: first.body.nextCursor });
    // ids are time-ordered: the started one, inserted last, is in the last batch; its cancel is requested
    expect(rest.body).toMatchObject({ matched: 3, cancelled: 2, cancelRequested: 1, nextCursor: null });
  });

  it('replays an ended job as a new one linked to it; refuses a bad payload and an unknown job', async () => {
    const [id] = await failed(1, 'one off');
    const res = await post(`/v1/jobs/${id}/replay`, { payload: { again: true } });
    expect(res.status).toBe(201);
    expect(res.body.job).toMatchObject({ type: 'bulk_http', status: 'queued', step: 'start', payload: { again: true } });
    const old = await h.request(`/v1/jobs/${id}`, { token: 'admin' });
    expect(((await old.json()) as Json).events.at(-1)).toMatchObject({ kind: 'replayed_by', detail: { job: res.body.job.id } });
    expect(await post(`/v1/jobs/${id}/replay`, { fromStep: 'nowhere' })).toMatchObject({ status: 400, body: { error: { field: 'fromStep' } } });
    expect((await post('/v1/jobs/0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b/replay')).status).toBe(404);
  });
});
