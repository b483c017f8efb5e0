import { beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { countJobs, createWorkerHarness, type WorkerHarness } from './support.ts';

/**
 * A wrong method on a known path is a 405 with `Allow`, for every route, API and dashboard alike,
 * with the routes read from the app itself so a new one is covered: the Allow list holds the
 * route's own methods, and every method it lists is one the path answers (not 405). An unknown
 * path stays a 404. No token is sent: a 405 comes before any route's authentication, and nothing
 * a tokenless request reaches writes.
 */
const NO_JOB = '00000000-0000-4000-8000-000000000000';
const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'];

/** Each path pattern and the methods its routes declare (GET brings HEAD, which Hono serves with it). */
const PATTERNS = new Map<string, Set<string>>();
for (const r of createApp().routes.filter((r) => r.method !== 'ALL')) {
  const methods = PATTERNS.get(r.path) ?? new Set<string>();
  methods.add(r.method);
  if (r.method === 'GET') methods.add('HEAD');
  PATTERNS.set(r.path, methods);
}

let h: WorkerHarness;
beforeAll(async () => {
  h = await createWorkerHarness();
});

async function send(method: string, path: string) {
  const body = method === 'GET' || method === 'HEAD' ? undefined : '{}';
  const res = await h.request(path, { method, token: null, body, headers: body ? { 'content-type': 'application/json' } : {} });
  return { status: res.status, allow: res.headers.get('allow'), text: await res.text() };
}

describe('405 Method Not Allowed', () => {
  it('every route answers a method it lacks with 405 and an Allow header listing what the path has', async () => {
    expect(PATTERNS.size).toBeGreaterThan(40);
    expect([...PATTERNS.keys()]).toEqual(expect.arrayContaining(['/v1/jobs/:id/cancel', '/dashboard/jobs/:id', '/']));
    const before = await countJobs(h.sql);
    for (const [pattern, own] of PATTERNS) {
      const path = pattern.replace(/:[a-z]+/g, NO_JOB);
      const wrong = METHODS.filter((m) => !own.has(m));
      let allow: string[] | null = null;
      for (const method of wrong) {
        const res = await send(method, path);
        // a path another pattern also matches (GET /v1/jobs/batch is GET /v1/jobs/:id) may answer it
        if (res.status !== 405) continue;
        expect(res.allow, `${method} ${pattern}`).toBeTruthy();
        allow = res.allow!.split(', ');
        expect(allow, `${method} ${pattern}`).toEqual(expect.arrayContaining([...own]));
        expect(allow, `${method} ${pattern}`).not.toContain(method);
        if (method !== 'HEAD') {
          expect(JSON.parse(res.text).error, `${method} ${pattern}`).toMatchObject({ code: 'method_not_allowed', message: expect.stringContaining(`${method} is not allowed`) });
        }
      }
      // the route's own methods, at least, were refused as wrong somewhere: each pattern has a 405
      expect(allow, `no 405 for any wrong method on ${pattern}`).not.toBeNull();
      for (const method of allow!) expect((await send(method, path)).status, `${method} ${pattern} is listed in Allow`).not.toBe(405);
    }
    expect(await countJobs(h.sql)).toBe(before);
  });

  it('an unknown path stays a 404, whatever the method, with no Allow', async () => {
    for (const [method, path] of [['GET', '/v2/jobs'], ['POST', '/nowhere'], ['DELETE', '/v1/jobs/x/y/z'], ['GET', '/v1/jobs/']]) {
      const res = await send(method!, path!);
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(res.allow, `${method} ${path}`).toBeNull();
    }
  });

  it('names the methods in order: GET /v1/pauses and POST /v1/pauses share a path', async () => {
    const res = await send('DELETE', '/v1/pauses');
    expect(res).toMatchObject({ status: 405, allow: 'GET, HEAD, POST' });
    expect(JSON.parse(res.text).error.message).toBe('DELETE is not allowed on /v1/pauses: use GET, HEAD, POST');
  });
});
