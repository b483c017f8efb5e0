import { beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { archiveKey } from '../../functions/platform/build/adapters/r2-log-archive.ts';
import { createWorkerHarness, TOKENS, type WorkerHarness } from './support.ts';

/**
 * Every answer of every route the app has (read from the app itself, so a new route cannot slip
 * past) carries `X-Content-Type-Options: nosniff` and `Cache-Control: no-store` — as an anonymous
 * caller sees it, with each token, and with a dashboard session — and so do the 404 of an unknown
 * path and a 413. A build log, which holds whatever the build printed (HTML included), is plain
 * text with a charset, nosniff and a sandboxing CSP on both routes that serve it.
 */
const ORIGIN = 'http://worker.test';
const NO_JOB = '00000000-0000-4000-8000-000000000000';
const ROUTES = createApp()
  .routes.filter((r) => r.method !== 'ALL')
  .map((r) => `${r.method} ${r.path}`)
  .filter((r, i, all) => all.indexOf(r) === i);

let h: WorkerHarness;
let session = '';
beforeAll(async () => {
  h = await createWorkerHarness({ STRIPE_SECRET_KEY: 'sk_test_headers', STRIPE_WEBHOOK_SECRET: 'whsec_headers' } as never);
  const res = await h.request('/dashboard/login', {
    method: 'POST',
    token: null,
    headers: { origin: ORIGIN, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ token: TOKENS.admin, next: '/' }).toString(),
  });
  session = /^__Host-starbase_session=([^;]+)/.exec(res.headers.get('set-cookie') ?? '')![1]!;
});

function expectHeaders(res: Response, what: string) {
  expect(res.headers.get('x-content-type-options'), what).toBe('nosniff');
  expect(res.headers.get('cache-control'), what).toBe('no-store');
}

describe('response headers', () => {
  it('every route answers nosniff and no-store: anonymous, with each token, and with a dashboard session', async () => {
    expect(ROUTES.length).toBeGreaterThan(20);
    const callers: Array<[string, Record<string, string>]> = [
      ['anonymous', {}],
      ...(Object.keys(TOKENS) as Array<keyof typeof TOKENS>).map((t): [string, Record<string, string>] => [`${t} token`, { authorization: `Bearer ${TOKENS[t]}` }]),
      ['dashboard session', { cookie: `__Host-starbase_session=${session}`, origin: ORIGIN }],
    ];
    const statuses = new Set<number>();
    for (const route of ROUTES) {
      const [method, pattern] = route.split(' ') as [string, string];
      const path = pattern.replace(/:[a-z]+/g, NO_JOB);
      for (const [who, headers] of callers) {
        // an empty form or JSON object: enough to reach the route's checks without changing what later callers see
        if (route === 'POST /dashboard/logout' || route === 'POST /dashboard/logout-everywhere') continue; // would end the session the loop uses
        const isForm = pattern.startsWith('/dashboard/');
        const res = await h.request(path, {
          method,
          token: null,
          headers: { ...headers, 'content-type': isForm ? 'application/x-www-form-urlencoded' : 'application/json' },
          body: method === 'GET' ? undefined : isForm ? '' : '{}',
        });
        await res.arrayBuffer();
        statuses.add(res.status);
        expectHeaders(res, `${who} → ${route} (${res.status})`);
      }
    }
    // the loop saw answers of every kind: success, redirect, refusals, not found
    for (const status of [200, 303, 400, 401, 403, 404]) expect(statuses, String(status)).toContain(status);
  });

  it('logout and log out everywhere answer with both headers too', async () => {
    for (const action of ['/dashboard/logout', '/dashboard/logout-everywhere']) {
      const res = await h.request(action, { method: 'POST', token: null, headers: { origin: ORIGIN, 'content-type': 'application/x-www-form-urlencoded' }, body: '' });
      expect(res.status).toBe(401);
      expectHeaders(res, action);
    }
  });

  it('an unknown path, a too-large body and a database-less error answer with both headers', async () => {
    const missing = await h.request('/v1/nothing-here');
    expect(missing.status).toBe(404);
    expectHeaders(missing, '404');
    const huge = await h.request('/v1/jobs', { method: 'POST', json: { type: 'uppercase', payload: { text: 'x'.repeat(300 * 1024) } } });
    expect(huge.status).toBe(413);
    expectHeaders(huge, '413');
    const unsigned = await h.request('/webhooks/stripe', { method: 'POST', token: null, body: '{}' });
    expect(unsigned.status).toBe(400);
    expectHeaders(unsigned, 'webhook 400');
  });

  it('a route that sets its own Cache-Control keeps it (/metrics: no-store already)', async () => {
    const res = await h.request('/metrics', { token: 'metrics' });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    expectHeaders(res, '/metrics');
  });
});

describe('build logs', () => {
  const HTML = '<html><script>alert(document.cookie)</script><img src=x onerror=alert(1)></html>';

  it('are plain text with a charset, nosniff, a sandboxing CSP and no-store, from the API and the dashboard', async () => {
    // a finished build's row and its archive, as the build job leaves them
    const [job] = await h.sql`select id from worker.enqueue_job('build', ${h.sql.json({ accountId: 'acct-headers', serviceId: 'svc-headers', branch: 'main', commitSha: 'abc1234' })}, delay_ms => 3600000)`;
    const id = job!.id as string;
    await h.sql`update worker.jobs set status = 'done', finished_at = now() where id = ${id}`;
    await (h.env.BUILD_LOGS as unknown as R2Bucket).put(archiveKey(id), `${HTML}\n`, { customMetadata: { lastSeq: '1' } });

    const api = await h.request(`/v1/builds/${id}/logs`, { token: 'enqueue' });
    const page = await h.request(`/dashboard/builds/${id}/log`, { token: null, headers: { cookie: `__Host-starbase_session=${session}` } });
    for (const [what, res] of [['API', api], ['dashboard', page]] as const) {
      expect(res.status, what).toBe(200);
      expect(await res.text(), what).toBe(`${HTML}\n`);
      expect(res.headers.get('content-type'), what).toBe('text/plain; charset=utf-8');
      expect(res.headers.get('content-security-policy'), what).toMatch(/default-src 'none'.*sandbox|sandbox.*default-src 'none'/);
      expectHeaders(res, what);
    }
  });
});
