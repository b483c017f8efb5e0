import { createExecutionContext, waitOnExecutionContext } from 'cloudflare:test';
import createClient from 'openapi-fetch';
import { beforeAll, describe, expect, it } from 'vitest';
import worker from '../../functions/index.ts';
import committed from '../../docs/openapi.json';
import { jobSchema } from '../../functions/http/schemas.ts';
import type { paths } from '../support/openapi.d.ts';
import { createWorkerHarness, TOKENS, type WorkerHarness } from './support.ts';

let h: WorkerHarness;
beforeAll(async () => {
  h = await createWorkerHarness();
});

/** A client generated from the committed document, calling the Worker's fetch handler. */
function client(token: keyof typeof TOKENS) {
  return createClient<paths>({
    baseUrl: 'http://worker.test',
    headers: { authorization: `Bearer ${TOKENS[token]}` },
    fetch: async (req: Request) => {
      const ctx = createExecutionContext();
      const res = await worker.fetch(req as never, h.env, ctx);
      await waitOnExecutionContext(ctx);
      return res as unknown as Response;
    },
  });
}

describe('GET /openapi.json', () => {
  it('is served without a token, is the committed docs/openapi.json, and holds no secret', async () => {
    const res = await h.request('/openapi.json', { token: null });
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(JSON.parse(text)).toEqual(committed);
    for (const secret of [...Object.values(TOKENS), h.env.SESSION_SECRET]) expect(text).not.toContain(secret);
  });
});

describe('a client generated from the document', () => {
  it('enqueues a job, reads it, finds it in the list, and gets the error answer the document declares', async () => {
    const api = client('enqueue');
    const created = await api.POST('/v1/jobs', { body: { type: 'uppercase', payload: { text: 'contract' }, delayMs: 3_600_000 } });
    expect(created.response.status).toBe(201);
    const job = created.data!.job;
    expect(job).toMatchObject({ type: 'uppercase', status: 'queued', payload: { text: 'contract' } });
    // the answer has exactly the fields the document declares, of the declared types
    expect(jobSchema.strict().safeParse(job).error).toBeUndefined();

    const got = await api.GET('/v1/jobs/{id}', { params: { path: { id: job.id } } });
    expect(got.response.status).toBe(200);
    expect(got.data!.job.id).toBe(job.id);
    expect(got.data!.events.map((e) => e.kind)).toContain('enqueued');

    const listed = await api.GET('/v1/jobs', { params: { query: { type: 'uppercase', status: 'queued', limit: 10 } } });
    expect(listed.response.status).toBe(200);
    expect(listed.data!.jobs.map((j) => j.id)).toContain(job.id);

    const refused = await api.POST('/v1/jobs', { body: { type: 'uppercase', payload: { text: 'x' }, priority: 5000 } });
    expect(refused.response.status).toBe(400);
    expect(refused.error).toMatchObject({ error: { code: 'invalid_input', field: 'priority' } });

    const missing = await api.GET('/v1/jobs/{id}', { params: { path: { id: '00000000-0000-0000-0000-000000000000' } } });
    expect(missing.response.status).toBe(404);
    expect(missing.error!.error.code).toBe('not_found');
  });
});
