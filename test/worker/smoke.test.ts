import { beforeAll, describe, expect, it } from 'vitest';
import { createWorkerHarness, type WorkerHarness } from './support.ts';

let h: WorkerHarness;
beforeAll(async () => {
  h = await createWorkerHarness();
});

describe('worker smoke', () => {
  it('healthz', async () => {
    const res = await h.request('/healthz', { token: null });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ok: true });
  });

  it('enqueue kicks the job to done without a tick', async () => {
    const res = await h.request('/v1/jobs', { method: 'POST', json: { type: 'uppercase', payload: { text: 'hi' } } });
    expect(res.status).toBe(201);
    const { job } = (await res.json()) as { job: { id: string } };
    const got = await h.request(`/v1/jobs/${job.id}`);
    expect(await got.json()).toMatchObject({ job: { status: 'done', result: { text: 'HI' } } });
  });
});
