import { beforeAll, describe, expect, it } from 'vitest';
import { createWorkerHarness, type WorkerHarness } from './support.ts';

let h: WorkerHarness;
type Json = Record<string, any>;
const json = async (res: Response): Promise<Json> => (await res.json()) as Json;
const uid = () => crypto.randomUUID().slice(0, 8);

beforeAll(async () => {
  h = await createWorkerHarness({ KICK_BUDGET_MS: '3000' } as never);
});

/** An await_signal job, enqueued and run to its wait (the enqueue's kick runs the first step). */
async function waitingJob(payload: Json): Promise<Json> {
  const res = await h.request('/v1/jobs', { method: 'POST', token: 'enqueue', json: { type: 'await_signal', payload } });
  expect(res.status).toBe(201);
  const { job } = await json(res);
  for (let i = 0; i < 100; i++) {
    const { events } = await json(await h.request(`/v1/jobs/${job.id}`));
    if (events.some((e: Json) => e.kind === 'waiting')) return job;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`job ${job.id} never waited`);
}

describe('POST /v1/jobs/:id/signal', () => {
  it('GET /v1/jobs/:id shows the open wait (name, key, resume step, timeout), and null once signalled', async () => {
    const name = `ev-${uid()}`;
    const job = await waitingJob({ name, key: 'k1', timeoutMs: 3_600_000 });
    const waiting = await json(await h.request(`/v1/jobs/${job.id}`));
    expect(waiting.wait).toMatchObject({ name, key: 'k1', step: 'resumed' });
    const timeoutAt = Date.parse(waiting.wait.timeoutAt);
    expect(timeoutAt - Date.parse(waiting.wait.since)).toBe(3_600_000);
    expect((await h.request('/v1/events', { method: 'POST', json: { name, key: 'k1' } })).status).toBe(200);
    expect((await json(await h.request(`/v1/jobs/${job.id}`))).wait).toBeNull();
    const never = await json(await h.request(`/v1/jobs/${(await waitingJob({ name: `ev-${uid()}` })).id}`));
    expect(never.wait).toMatchObject({ key: null, timeoutAt: null });
  });

  it('resumes a waiting job with the payload, in the request\'s drain; 409 once it ended', async () => {
    const name = `ev-${uid()}`;
    const job = await waitingJob({ name });
    const res = await h.request(`/v1/jobs/${job.id}/signal`, { method: 'POST', json: { name, payload: { ok: 1 } } });
    expect(res.status).toBe(200);
    const body = await json(res);
    expect(body).toMatchObject({ delivered: true, keptEventId: null, job: { id: job.id } });
    let after: Json = {};
    for (let i = 0; i < 100 && after.status !== 'done'; i++) {
      after = (await json(await h.request(`/v1/jobs/${job.id}`))).job;
      if (after.status !== 'done') await new Promise((r) => setTimeout(r, 20));
    }
    expect(after.result).toMatchObject({ event: { outcome: 'signalled', name, payload: { ok: 1 } } });
    const again = await h.request(`/v1/jobs/${job.id}/signal`, { method: 'POST', json: { name } });
    expect(again.status).toBe(409);
  });

  it('refuses bad input naming the field, an unknown job with 404, the enqueue token with 403, writing nothing', async () => {
    const job = await waitingJob({ name: `ev-${uid()}` });
    const count = async () => (await h.sql`select count(*)::int as n from worker.signal_events`)[0]!.n;
    const before = await count();
    const blank = await h.request(`/v1/jobs/${job.id}/signal`, { method: 'POST', json: { name: ' ' } });
    expect(blank.status).toBe(400);
    expect((await json(blank)).error.field).toBe('name');
    const extra = await h.request(`/v1/jobs/${job.id}/signal`, { method: 'POST', json: { name: 'x', wat: 1 } });
    expect(extra.status).toBe(400);
    expect((await h.request(`/v1/jobs/${crypto.randomUUID()}/signal`, { method: 'POST', json: { name: 'x' } })).status).toBe(404);
    expect((await h.request(`/v1/jobs/${job.id}/signal`, { method: 'POST', token: 'enqueue', json: { name: 'x' } })).status).toBe(403);
    const ev = await h.request('/v1/events', { method: 'POST', json: { name: 'x', key: '' } });
    expect(ev.status).toBe(400);
    expect((await json(ev)).error.field).toBe('key');
    expect(await count()).toBe(before);
  });
});

describe('POST /v1/events', () => {
  it('delivers to every job waiting on (name, key) and keeps one nobody waits on', async () => {
    const name = `ev-${uid()}`;
    const a = await waitingJob({ name, key: 'k' });
    const b = await waitingJob({ name, key: 'k' });
    const res = await h.request('/v1/events', { method: 'POST', json: { name, key: 'k', payload: 'go' } });
    expect(res.status).toBe(200);
    const body = await json(res);
    expect(body.delivered.sort()).toEqual([a.id, b.id].sort());
    const kept = await json(await h.request('/v1/events', { method: 'POST', json: { name, key: 'other' } }));
    expect(kept).toEqual({ delivered: [], keptEventId: expect.any(Number) });
  });
});
