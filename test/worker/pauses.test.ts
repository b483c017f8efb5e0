import { beforeAll, describe, expect, it } from 'vitest';
import { createWorkerHarness, type WorkerHarness } from './support.ts';

/** Pause and resume over HTTP: the routes call worker.pause_claims / resume_claims, as the CLI does. */
let h: WorkerHarness;
type Json = Record<string, any>;
const json = async (res: Response): Promise<Json> => (await res.json()) as Json;

beforeAll(async () => {
  h = await createWorkerHarness();
});

describe('POST /v1/pauses, POST /v1/pauses/resume, GET /v1/pauses', () => {
  it('pauses a type (claims skip it, the job waits queued), lists it, refuses it twice, and resumes it', async () => {
    const paused = await h.request('/v1/pauses', { method: 'POST', json: { kind: 'type', name: 'countdown', reason: 'provider incident', pausedBy: 'alice' } });
    expect(paused.status).toBe(201);
    expect((await json(paused)).pause).toMatchObject({ kind: 'type', name: 'countdown', pausedBy: 'alice', reason: 'provider incident' });

    // an enqueue's kick claims nothing of a paused type
    const { job } = await json(await h.request('/v1/jobs', { method: 'POST', token: 'enqueue', json: { type: 'countdown', payload: { n: 0 } } }));
    const claimed = await h.sql`select * from worker.claim_jobs('pause-test', null, 10, null, array['countdown'])`;
    expect(claimed).toHaveLength(0);
    expect((await h.sql`select status from worker.jobs where id = ${job.id}`)[0]!.status).toBe('queued');

    const listed = await json(await h.request('/v1/pauses', { token: 'metrics' }));
    expect(listed.pauses).toEqual([expect.objectContaining({ kind: 'type', name: 'countdown', pausedBy: 'alice' })]);

    const again = await h.request('/v1/pauses', { method: 'POST', json: { kind: 'type', name: 'countdown', reason: 'again' } });
    expect(again.status).toBe(409);
    const unknown = await h.request('/v1/pauses', { method: 'POST', json: { kind: 'type', name: 'no_such_type', reason: 'x' } });
    expect(unknown.status).toBe(404);
    const noReason = await h.request('/v1/pauses', { method: 'POST', json: { kind: 'pool', name: 'eu', reason: ' ' } });
    expect(noReason.status).toBe(400);
    expect((await json(noReason)).error.field).toBe('reason');
    const forbidden = await h.request('/v1/pauses', { method: 'POST', token: 'enqueue', json: { kind: 'pool', name: 'eu', reason: 'x' } });
    expect(forbidden.status).toBe(403);
    expect(await h.sql`select kind, name from worker.pauses`).toEqual([{ kind: 'type', name: 'countdown' }]);

    const resumed = await h.request('/v1/pauses/resume', { method: 'POST', json: { kind: 'type', name: 'countdown' } });
    expect(resumed.status).toBe(200);
    expect((await json(resumed)).resumed).toMatchObject({ name: 'countdown', pausedBy: 'alice' });
    expect((await h.request('/v1/pauses/resume', { method: 'POST', json: { kind: 'type', name: 'countdown' } })).status).toBe(409);
    const [after] = await h.sql`select * from worker.claim_jobs('pause-test', null, 10, null, array['countdown'])`;
    expect(after?.id).toBe(job.id);
  });

  it('refuses a pool that nothing defines (404 naming it), and pauses one a capacity row or a job names', async () => {
    const unknown = await h.request('/v1/pauses', { method: 'POST', json: { kind: 'pool', name: 'eu-wset', reason: 'typo' } });
    expect(unknown.status).toBe(404);
    expect((await json(unknown)).error).toMatchObject({ code: 'not_found', message: expect.stringContaining('unknown pool "eu-wset"') });
    expect(await h.sql`select * from worker.pauses where kind = 'pool'`).toEqual([]);

    await h.sql`insert into worker.pool_capacity (pool, max_running_weight) values ('pause-capacity', 0)`;
    await h.request('/v1/jobs', { method: 'POST', json: { type: 'countdown', payload: { n: 0 }, pool: 'pause-named', delayMs: 3_600_000 } });
    for (const name of ['pause-capacity', 'pause-named']) {
      const paused = await h.request('/v1/pauses', { method: 'POST', json: { kind: 'pool', name, reason: 'maintenance' } });
      expect(paused.status, name).toBe(201);
      expect((await h.request('/v1/pauses/resume', { method: 'POST', json: { kind: 'pool', name } })).status, name).toBe(200);
    }
  });
});
