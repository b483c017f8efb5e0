import { beforeAll, describe, expect, it } from 'vitest';
import { claimJobs, enqueue } from '../../queue/index.ts';
import { arrayLiteral } from '../../functions/cloudflare-socket.ts';
import { createWorkerHarness, type WorkerHarness } from './support.ts';

/** The Worker's postgres.js client (functions/cloudflare-socket.ts), which reads no type list on connect. */
let h: WorkerHarness;
beforeAll(async () => {
  h = await createWorkerHarness();
});

describe("the Worker's database client", () => {
  it('sends array parameters: a claim with a type filter takes only those types', async () => {
    await h.sql`update worker.jobs set status = 'cancelled', finished_at = now() where status in ('queued', 'running')`;
    const upper = (await enqueue(h.sql, { type: 'uppercase', payload: { text: 'a' } })).job;
    const countdown = (await enqueue(h.sql, { type: 'countdown', payload: { n: 1 } })).job;
    const claimed = await claimJobs(h.sql, { workerId: 'client-test', limit: 10, types: ['uppercase', 'a "quoted", \\ type'] });
    expect(claimed.map((j) => j.id)).toEqual([upper.id]);
    expect(await h.sql`select status from worker.jobs where id = ${countdown.id}`).toEqual([{ status: 'queued' }]);
    expect(await claimJobs(h.sql, { workerId: 'client-test', limit: 10, types: [] })).toEqual([]);
  });

  it('round-trips every element of a text[] and a uuid[]', async () => {
    const texts = ['plain', 'with,comma', 'with "quotes"', 'back\\slash', '{braces}', '', 'NULL', 'ünïcode'];
    const [row] = await h.sql`select to_jsonb(${texts}::text[]) as back, (${['0190a2b3-0000-7000-8000-000000000001']}::uuid[])[1]::text as id`;
    expect(row).toEqual({ back: texts, id: '0190a2b3-0000-7000-8000-000000000001' });
    expect(arrayLiteral([null, 'x'])).toBe('{NULL,"x"}');
  });
});
