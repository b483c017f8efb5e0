import { beforeAll, describe, expect, it } from 'vitest';
import { createWorkerHarness, TOKENS, type WorkerHarness } from './support.ts';

/**
 * Stored text is scrubbed on the way out too: a secret reaches worker.jobs and job_events by paths
 * the write-time scrubber does not see (operator SQL, fail and cancel reasons, rows written before
 * the secret was configured). Every answer shows what the system produced with the secret
 * removed, while what the caller sent comes back as sent (scrubbing it would confirm a guess).
 */
type Json = Record<string, any>;
const SECRET = TOKENS.admin;

let h: WorkerHarness;
beforeAll(async () => {
  h = await createWorkerHarness();
});

async function read(path: string, token: 'admin' | 'enqueue'): Promise<{ text: string; json: Json }> {
  const res = await h.request(path, { token });
  const text = await res.text();
  expect(res.status, text).toBe(200);
  return { text, json: JSON.parse(text) as Json };
}

describe('answers scrub stored text', () => {
  it('a secret written into a failed job by SQL is in no API answer; a payload holding it comes back as sent', async () => {
    const res = await h.request('/v1/jobs', { method: 'POST', token: 'enqueue', json: { type: 'fail', payload: { message: 'plain failure' }, maxAttempts: 1 } });
    expect(res.status).toBe(201);
    const id = ((await res.json()) as Json).job.id as string;
    const [row] = await h.sql`select status from worker.jobs where id = ${id}`;
    expect(row!.status).toBe('failed');
    // the issue's reproduction, and the other columns a step's output lands in
    await h.sql`
      update worker.jobs
         set last_error = ${`manual: ${SECRET}`},
             checkpoint = ${h.sql.json({ seen: [SECRET] })}
       where id = ${id}`;
    await h.sql`insert into worker.job_events (job_id, at, kind, detail) values (${id}, now(), 'failed', ${h.sql.json({ error: `manual: ${SECRET}` })})`;

    const one = await read(`/v1/jobs/${id}`, 'enqueue');
    expect(one.json.job.lastError).toBe('manual: [redacted]');
    expect(one.json.job.checkpoint).toEqual({ seen: ['[redacted]'] });
    expect(one.json.events.find((e: Json) => e.detail.error === 'manual: [redacted]')).toBeDefined();
    const listed = await read('/v1/jobs?status=failed', 'enqueue');
    expect(listed.json.jobs.find((j: Json) => j.id === id).lastError).toBe('manual: [redacted]');
    const dead = await read('/v1/dead-letters?type=fail', 'admin');
    expect(dead.json.groups[0].sampleError).toBe('manual: [redacted]');
    for (const text of [one.text, listed.text, dead.text]) expect(text).not.toContain(SECRET);

    // what the caller sent is the caller's: shown as sent, in the payload and the enqueued event
    const sent = await h.request('/v1/jobs', { method: 'POST', token: 'enqueue', json: { type: 'uppercase', payload: { text: SECRET }, delayMs: 3_600_000 } });
    const sentId = ((await sent.json()) as Json).job.id as string;
    const back = await read(`/v1/jobs/${sentId}`, 'enqueue');
    expect(back.json.job.payload).toEqual({ text: SECRET });
    expect(back.json.events.find((e: Json) => e.kind === 'enqueued').detail.request.payload).toEqual({ text: SECRET });
  });
});
