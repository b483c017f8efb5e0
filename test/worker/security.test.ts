import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { Hono } from 'hono';
import { createApp } from '../../functions/app.ts';
import type { WorkerEnv } from '../../functions/config.ts';
import { scopesOf, tokensEqual, type Scope } from '../../functions/http/auth.ts';
import { respondError } from '../../functions/http/errors.ts';
import { createWorkerHarness, TOKENS, type WorkerHarness } from './support.ts';

/**
 * Security, route by route, with the routes read from the app itself so a new one cannot slip
 * past: bearer tokens on everything but /healthz (the Stripe webhook authenticates by signature,
 * the dashboard by session), scopes, constant-time token comparison, secrets kept out of answers,
 * events and logs (a canary secret in a payload and in an error message), body-size limits, the
 * Stripe signature and its replay window, and the dashboard's CSRF and cookie flags.
 */

/** A configured secret (the Stripe key) that a failing step echoes: it must show up nowhere. */
const CANARY = 'sk_test_canary_5f0c3b1e9a7d41c2';
/** A secret a caller puts under a secret-named payload key. */
const PAYLOAD_CANARY = 'canary-payload-password-77e2';
const WEBHOOK_SECRET = 'whsec_security_test_secret';
const ORIGIN = 'http://worker.test';
const NO_JOB = '00000000-0000-4000-8000-000000000000';

let h: WorkerHarness;
beforeAll(async () => {
  h = await createWorkerHarness({ STRIPE_SECRET_KEY: CANARY, STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET } as never);
});

const ROUTES = createApp()
  .routes.filter((r) => r.method !== 'ALL')
  .map((r) => `${r.method} ${r.path}`)
  .filter((r, i, all) => all.indexOf(r) === i);

const isDashboard = (route: string) => / \/dashboard\//.test(route) || route.endsWith(' /');
/** Routes that take no bearer token, and what authenticates them instead. */
const NO_BEARER: Record<string, string> = {
  'GET /healthz': 'nothing: liveness',
  'GET /openapi.json': 'nothing: the public contract (no secret in it)',
  'POST /webhooks/stripe': 'the Stripe-Signature header',
  'POST /webhooks/depot': 'the Depot-Signature header (DEPOT_WEBHOOK_SECRET)',
  'GET /dashboard/login': 'nothing: the login form',
  'POST /dashboard/login': 'the admin token in the form, from our origin',
  'GET /dashboard/assets/live-log.js': "nothing: the build page's script, which holds no data",
};

/** The scopes each API route accepts (an admin token carries all three). Every API route must be listed. */
const SCOPES: Record<string, Scope[]> = {
  'POST /v1/jobs': ['enqueue'],
  'POST /v1/jobs/batch': ['enqueue'],
  'GET /v1/jobs': ['enqueue', 'admin'],
  'GET /v1/jobs/:id': ['enqueue', 'admin'],
  'POST /v1/jobs/:id/cancel': ['admin'],
  'POST /v1/jobs/:id/retry': ['admin'],
  'POST /v1/jobs/:id/fail': ['admin'],
  'POST /v1/jobs/:id/reschedule': ['admin'],
  'POST /v1/jobs/:id/priority': ['admin'],
  'POST /v1/jobs/:id/release': ['admin'],
  'POST /v1/jobs/:id/signal': ['admin'],
  'POST /v1/events': ['admin'],
  'GET /v1/pauses': ['admin', 'metrics'],
  'POST /v1/pauses': ['admin'],
  'POST /v1/pauses/resume': ['admin'],
  'GET /v1/rate-limits': ['admin', 'metrics'],
  'POST /v1/rate-limits/resume': ['admin'],
  'POST /v1/jobs/:id/replay': ['admin'],
  'POST /v1/jobs/bulk/retry': ['admin'],
  'POST /v1/jobs/bulk/cancel': ['admin'],
  'GET /v1/dead-letters': ['admin'],
  'POST /v1/leader/release': ['admin'],
  'GET /v1/leader': ['admin', 'metrics'],
  'GET /v1/dispatchers': ['admin', 'metrics'],
  'POST /v1/maintenance/rescue': ['admin'],
  'POST /v1/tick': ['admin'],
  'POST /v1/pushes': ['enqueue'],
  'GET /v1/builds/:id/logs': ['enqueue', 'admin'],
  'POST /v1/databases': ['enqueue'],
  'POST /v1/clusters': ['enqueue'],
  'POST /v1/clusters/:id/bootstrapped': ['admin'],
  'GET /metrics': ['metrics'],
};
const TOKEN_SCOPES: Record<keyof typeof TOKENS, Scope[]> = { admin: ['admin', 'enqueue', 'metrics'], enqueue: ['enqueue'], metrics: ['metrics'] };

async function snapshot() {
  const [row] = await h.sql`
    select (select count(*)::int from worker.jobs) as jobs, (select count(*)::int from worker.job_history) as events,
           (select count(*)::int from worker.jobs where status in ('cancelled', 'failed')) as ended,
           (select coalesce(max(generation), 0)::int from worker.leader_lease) as generation,
           (select count(*)::int from platform.stripe_events) as stripe_events`;
  return row;
}

async function call(route: string, init: { headers?: Record<string, string>; body?: string; path?: string } = {}) {
  const [method, pattern] = route.split(' ') as [string, string];
  const path = init.path ?? pattern.replace(/:[a-z]+/g, NO_JOB);
  const res = await h.request(path, { method, token: null, headers: init.headers, body: method === 'GET' ? undefined : (init.body ?? '{}') });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

describe('authentication', () => {
  it('every route but /healthz, the Stripe webhook and the dashboard login refuses a request without a valid bearer token', async () => {
    const open: string[] = [];
    for (const route of ROUTES) {
      const before = await snapshot();
      const res = await call(route);
      const toLogin = res.status === 303 && res.headers.get('location')?.startsWith('/dashboard/login');
      if (res.status !== 401 && !toLogin) open.push(route);
      if (res.status === 401 && !isDashboard(route)) {
        expect(res.headers.get('www-authenticate'), route).toBe('Bearer');
        expect(JSON.parse(res.text).error.code, route).toBe('unauthorized');
      }
      expect(await snapshot(), route).toEqual(before);
    }
    expect(open.sort()).toEqual(Object.keys(NO_BEARER).sort());
  });

  it('a wrong token, a token in the wrong scheme, in the query string or in a cookie is a 401 on every bearer route', async () => {
    const bearerRoutes = ROUTES.filter((r) => !(r in NO_BEARER) && !isDashboard(r));
    for (const route of bearerRoutes) {
      const [, pattern] = route.split(' ') as [string, string];
      const path = pattern.replace(/:[a-z]+/g, NO_JOB);
      const attempts: Array<{ headers?: Record<string, string>; path?: string }> = [
        { headers: { authorization: 'Bearer not-the-token' } },
        { headers: { authorization: `Bearer ${TOKENS.admin}x` } },
        { headers: { authorization: `Bearer ${TOKENS.admin.slice(0, -1)}` } },
        { headers: { authorization: `Basic ${btoa(`admin:${TOKENS.admin}`)}` } },
        { headers: { authorization: TOKENS.admin } },
        { headers: { authorization: `Bearer  ${TOKENS.admin}` } },
        { path: `${path}?token=${TOKENS.admin}&access_token=${TOKENS.admin}` },
        { headers: { cookie: `token=${TOKENS.admin}; __Host-starbase_session=${TOKENS.admin}` } },
      ];
      for (const attempt of attempts) expect((await call(route, attempt)).status, `${route} ${JSON.stringify(attempt)}`).toBe(401);
    }
  });
});

describe('scopes', () => {
  it('lists every API route', () => {
    const api = ROUTES.filter((r) => !(r in NO_BEARER) && !isDashboard(r));
    expect(api.filter((r) => !(r in SCOPES))).toEqual([]);
  });

  it('a token without the scope gets 403 and changes nothing: an enqueue token cannot cancel, fail or read metrics', async () => {
    const [{ id }] = (await h.sql`select id from worker.enqueue_job('uppercase', '{"text": "scoped"}', delay_ms => 3600000)`) as unknown as [{ id: string }];
    for (const [route, allowed] of Object.entries(SCOPES)) {
      for (const token of Object.keys(TOKENS) as Array<keyof typeof TOKENS>) {
        const permitted = TOKEN_SCOPES[token].some((s) => allowed.includes(s));
        if (permitted) continue; // the allowed side is every other API test; here only the refusals, which must write nothing
        const before = await snapshot();
        const [, pattern] = route.split(' ') as [string, string];
        const res = await call(route, { headers: { authorization: `Bearer ${TOKENS[token]}`, 'content-type': 'application/json' }, path: pattern.replace(/:[a-z]+/g, id), body: '{"reason": "x", "priority": 1, "delayMs": 1}' });
        expect(res.status, `${token} → ${route}`).toBe(403);
        expect(JSON.parse(res.text).error.code).toBe('forbidden');
        expect(await snapshot(), `${token} → ${route}`).toEqual(before);
      }
    }
    const [row] = await h.sql`select status from worker.jobs where id = ${id}`;
    expect(row!.status).toBe('queued');
  });
});

describe('token comparison', () => {
  afterEach(() => vi.restoreAllMocks());

  it('tokensEqual is exact: any change, longer, shorter or empty is unequal', async () => {
    const t = TOKENS.admin;
    expect(await tokensEqual(t, t)).toBe(true);
    for (const other of ['', t.slice(0, -1), `${t}x`, `x${t.slice(1)}`, `${t.slice(0, -1)}x`, t.toUpperCase(), `${t}\u0000`]) {
      expect(await tokensEqual(other, t), JSON.stringify(other)).toBe(false);
    }
  });

  it('hashes both sides before comparing, so length and the first differing byte cannot show in the timing', async () => {
    const digest = vi.spyOn(crypto.subtle, 'digest');
    await tokensEqual('a', 'a much longer expected token');
    await tokensEqual('x'.repeat(512), 'short');
    // each call hashes both sides to 32 bytes: the byte loop always runs over equal lengths
    expect(digest).toHaveBeenCalledTimes(4);
    expect(digest.mock.calls.every(([algorithm]) => algorithm === 'SHA-256')).toBe(true);
    // and the loop accumulates differences instead of returning at the first one (a timing test would be noise)
    const source = tokensEqual.toString();
    expect(source).toMatch(/\|=/);
    expect(source.match(/return/g)).toHaveLength(1);
  });

  it('scopesOf compares the presented token with every configured token, matching or not', async () => {
    const env = { ADMIN_TOKEN: TOKENS.admin, ENQUEUE_TOKEN: TOKENS.enqueue, METRICS_TOKEN: TOKENS.metrics } as unknown as WorkerEnv;
    const digest = vi.spyOn(crypto.subtle, 'digest');
    for (const [presented, scopes] of [
      [TOKENS.admin, ['admin', 'enqueue', 'metrics']],
      [TOKENS.metrics, ['metrics']],
      ['wrong', null],
    ] as const) {
      digest.mockClear();
      expect(await scopesOf(env, `Bearer ${presented}`)).toEqual(scopes);
      // three configured tokens, two hashes each: no early exit on the first match (the admin token is checked first)
      expect(digest).toHaveBeenCalledTimes(6);
    }
  });
});

describe('secrets stay out of answers, events and logs', () => {
  afterEach(() => vi.restoreAllMocks());

  it('a configured secret echoed by a failing step, and a secret under a payload key, appear in no answer, event or log line', async () => {
    const lines: string[] = [];
    for (const method of ['log', 'error', 'warn', 'info', 'debug'] as const) {
      vi.spyOn(console, method).mockImplementation((...args: unknown[]) => void lines.push(args.map(String).join(' ')));
    }
    const failing = await call('POST /v1/jobs', {
      headers: { authorization: `Bearer ${TOKENS.enqueue}`, 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'fail', payload: { message: `stripe refused the key ${CANARY}` }, maxAttempts: 1 }),
    });
    expect(failing.status).toBe(201);
    const withPassword = await call('POST /v1/jobs', {
      headers: { authorization: `Bearer ${TOKENS.enqueue}`, 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'uppercase', payload: { text: 'hello', password: PAYLOAD_CANARY, nested: { apiKey: PAYLOAD_CANARY } } }),
    });
    expect(withPassword.status).toBe(201);
    const failedId = JSON.parse(failing.text).job.id;
    const [row] = await h.sql`select status, last_error from worker.jobs where id = ${failedId}`;
    // scrubbed before it is stored: worker.jobs is read by more than the API (a Grafana reader
    // role, `npm run ops`, anyone with a SQL client), so a secret must not sit in last_error
    expect(row).toEqual({ status: 'failed', last_error: 'stripe refused the key [redacted]' });

    const admin = { authorization: `Bearer ${TOKENS.admin}` };
    const answers = [
      failing.text,
      withPassword.text,
      (await call('GET /v1/jobs/:id', { headers: admin, path: `/v1/jobs/${failedId}` })).text,
      (await call('GET /v1/jobs/:id', { headers: admin, path: `/v1/jobs/${JSON.parse(withPassword.text).job.id}` })).text,
      (await call('GET /v1/jobs', { headers: admin, path: '/v1/jobs?limit=50' })).text,
      (await call('GET /v1/jobs', { headers: admin, path: '/v1/jobs?status=failed' })).text,
      (await call('POST /v1/jobs/:id/retry', { headers: { ...admin, 'content-type': 'application/json' }, path: `/v1/jobs/${failedId}/retry` })).text,
    ];
    const one = JSON.parse(answers[2]!);
    expect(one.job.lastError).toBe('stripe refused the key [redacted]');
    expect(one.events.find((e: { kind: string }) => e.kind === 'failed').detail.error).toBe('stripe refused the key [redacted]');
    expect(JSON.parse(answers[3]!).job.payload).toEqual({ text: 'hello', password: '[redacted]', nested: { apiKey: '[redacted]' } });
    // What the caller sent is shown as sent (scrubbing it by value made the scrubber an oracle,
    // test/worker/scrub.test.ts): the canary may appear in the payload's own message, nowhere else.
    const sent = `"message":"stripe refused the key ${CANARY}"`;
    expect(JSON.parse(answers[2]!).job.payload).toEqual({ message: `stripe refused the key ${CANARY}` });
    for (const text of [...answers.map((a) => a.split(sent).join('')), ...lines]) {
      expect(text).not.toContain(CANARY);
      expect(text).not.toContain(PAYLOAD_CANARY);
    }
    expect(lines.length).toBeGreaterThan(0); // the steps did log
  });

  it('a secret nested below the redaction depth is elided, not shown', async () => {
    let payload: unknown = { apiToken: PAYLOAD_CANARY };
    for (let i = 0; i < 40; i++) payload = { deeper: payload };
    payload = { text: 'an uppercase job', ...(payload as object) };
    const [row] = await h.sql`select id from worker.enqueue_job('uppercase', ${JSON.stringify(payload)}::text::jsonb, delay_ms => 3600000)`;
    const res = await call('GET /v1/jobs/:id', { headers: { authorization: `Bearer ${TOKENS.admin}` }, path: `/v1/jobs/${row!.id}` });
    expect(res.status).toBe(200);
    expect(res.text).not.toContain(PAYLOAD_CANARY);
    expect(res.text).toContain('[nested too deep]');
  });

  it('an unhandled error that echoes a secret is logged with the secret scrubbed, and answered without it', async () => {
    const lines: string[] = [];
    vi.spyOn(console, 'error').mockImplementation((...args: unknown[]) => void lines.push(args.map(String).join(' ')));
    const app = new Hono<{ Bindings: WorkerEnv }>();
    app.get('/boom', () => {
      throw new Error(`upstream rejected ${CANARY}`);
    });
    app.onError((error, c) => respondError(c, error));
    const res = await app.request('/boom', {}, { ...h.env });
    expect(res.status).toBe(500);
    expect(await res.text()).not.toContain(CANARY);
    expect(lines.join('\n')).toContain('upstream rejected [redacted]');
    expect(lines.join('\n')).not.toContain(CANARY);
  });
});

describe('size limits', () => {
  /** Routes that never read their body: a big one is not buffered, so there is nothing to limit. */
  const BODYLESS = new Set(['POST /v1/leader/release', 'POST /v1/maintenance/rescue', 'POST /v1/tick']);

  it('every route that reads a body answers a 5 MB one with 413 and writes nothing', async () => {
    const huge = JSON.stringify({ type: 'uppercase', payload: { text: 'x'.repeat(5 * 1024 * 1024) } });
    for (const route of ROUTES.filter((r) => r.startsWith('POST ') && !BODYLESS.has(r))) {
      const before = await snapshot();
      const res = await call(route, {
        headers: { authorization: `Bearer ${TOKENS.admin}`, 'content-type': isDashboard(route) ? 'application/x-www-form-urlencoded' : 'application/json', origin: ORIGIN },
        body: huge,
      });
      expect(res.status, route).toBe(413);
      expect(await snapshot(), route).toEqual(before);
    }
  });

  it('POST /v1/jobs takes 256 KiB, the batch 4 MiB and 1000 jobs', async () => {
    const admin = { authorization: `Bearer ${TOKENS.admin}`, 'content-type': 'application/json' };
    // (the bulk in a field uppercase's schema leaves unbounded: `text` is checked at enqueue, at most 64 Ki)
    const body = (n: number) => JSON.stringify({ type: 'uppercase', payload: { text: 'x', pad: 'x'.repeat(n) }, delayMs: 3_600_000 });
    const envelope = body(0).length;
    expect((await call('POST /v1/jobs', { headers: admin, body: body(256 * 1024 - envelope) })).status).toBe(201);
    const before = await snapshot();
    expect((await call('POST /v1/jobs', { headers: admin, body: body(256 * 1024 - envelope + 1) })).status).toBe(413);
    const bigBatch = JSON.stringify({ jobs: Array.from({ length: 5 }, () => ({ type: 'uppercase', payload: { text: 'x'.repeat(900 * 1024) } })) });
    expect((await call('POST /v1/jobs/batch', { headers: admin, body: bigBatch })).status).toBe(413);
    const many = await call('POST /v1/jobs/batch', { headers: admin, body: JSON.stringify({ jobs: Array.from({ length: 1001 }, () => ({ type: 'uppercase' })) }) });
    expect(many.status).toBe(400);
    expect(JSON.parse(many.text).error.field).toBe('jobs');
    expect(await snapshot()).toEqual(before);
  });
});

describe('the Stripe webhook', () => {
  async function sign(payload: string, secret = WEBHOOK_SECRET, at = Math.floor(Date.now() / 1000)): Promise<string> {
    const key = await crypto.subtle.importKey('raw', new TextEncoder().encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
    const mac = new Uint8Array(await crypto.subtle.sign('HMAC', key, new TextEncoder().encode(`${at}.${payload}`)));
    return `t=${at},v1=${Array.from(mac, (b) => b.toString(16).padStart(2, '0')).join('')}`;
  }
  const event = (id: string) =>
    JSON.stringify({ id, object: 'event', api_version: '2026-10-28.endive', created: Math.floor(Date.now() / 1000), data: { object: { id: 'in_x', object: 'invoice', customer: 'cus_nobody' } }, livemode: false, pending_webhooks: 1, request: { id: null, idempotency_key: null }, type: 'invoice.paid' });
  const deliver = (body: string, signature: string | null) => call('POST /webhooks/stripe', { headers: signature ? { 'stripe-signature': signature } : {}, body });

  it('accepts a fresh, correctly signed event once; a repeat inside the window is acknowledged as a duplicate and applies nothing', async () => {
    const body = event('evt_security_ok');
    const signature = await sign(body);
    const first = await deliver(body, signature);
    expect(first.status).toBe(200);
    expect(JSON.parse(first.text)).toMatchObject({ received: true, eventId: 'evt_security_ok' });
    const before = await snapshot();
    const again = await deliver(body, signature);
    expect(again.status).toBe(200);
    expect(JSON.parse(again.text).outcome).toBe('duplicate');
    expect(await snapshot()).toEqual(before);
  });

  it('refuses a missing, forged, tampered, wrong-scheme or replayed-too-late signature with 400 and writes nothing', async () => {
    const body = event('evt_security_bad');
    const now = Math.floor(Date.now() / 1000);
    const good = await sign(body);
    const cases: Array<[string, string, string | null]> = [
      ['missing', body, null],
      ['another secret', body, await sign(body, 'whsec_someone_else')],
      ['tampered body', body.replace('in_x', 'in_y'), good],
      ['v0 scheme only', body, good.replace('v1=', 'v0=')],
      ['garbage header', body, 't=abc,v1=zz'],
      ['replayed after 5 minutes', body, await sign(body, WEBHOOK_SECRET, now - 301)],
    ];
    for (const [name, payload, signature] of cases) {
      const before = await snapshot();
      const res = await deliver(payload, signature);
      expect(res.status, name).toBe(400);
      expect(await snapshot(), name).toEqual(before);
    }
  });
});

describe('the dashboard', () => {
  async function login() {
    const res = await h.request('/dashboard/login', {
      method: 'POST',
      token: null,
      headers: { origin: ORIGIN, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: TOKENS.admin, next: '/' }).toString(),
    });
    return res.headers.get('set-cookie') ?? '';
  }

  it("sets its session cookie HttpOnly, Secure, SameSite=Strict, host-only (__Host-), and it is not the token", async () => {
    const cookie = await login();
    expect(cookie).toMatch(/^__Host-starbase_session=/);
    expect(cookie).toMatch(/; HttpOnly/i);
    expect(cookie).toMatch(/; Secure/i);
    expect(cookie).toMatch(/; SameSite=Strict/i);
    expect(cookie).toMatch(/; Path=\//i);
    expect(cookie).not.toMatch(/; Domain=/i);
    expect(cookie).not.toContain(TOKENS.admin);
  });

  it('every dashboard action refuses a post without a session, from another origin, or without its CSRF token, changing nothing', async () => {
    const session = (await login()).split(';')[0]!;
    const [{ id }] = (await h.sql`select id from worker.enqueue_job('uppercase', '{"text": "csrf"}', delay_ms => 3600000)`) as unknown as [{ id: string }];
    const [{ alert }] = (await h.sql`insert into worker.alerts (kind, key, message) values ('poison_job', 'csrf-test', 'x') returning id::int as alert`) as unknown as [{ alert: number }];
    const actions = ROUTES.filter((r) => r.startsWith('POST /dashboard/') && r !== 'POST /dashboard/login');
    expect(actions.length).toBeGreaterThan(3);
    for (const route of actions) {
      const path = route.slice('POST '.length).replace(':id', route.includes('/alerts/') ? String(alert) : id);
      const form = 'content-type';
      const attempts: Array<[string, Record<string, string>, number]> = [
        ['no session', { origin: ORIGIN, [form]: 'application/x-www-form-urlencoded' }, 401],
        ['another origin', { origin: 'https://evil.example', cookie: session, [form]: 'application/x-www-form-urlencoded' }, 403],
        ['no origin', { cookie: session, [form]: 'application/x-www-form-urlencoded' }, 403],
        ['no CSRF token', { origin: ORIGIN, cookie: session, [form]: 'application/x-www-form-urlencoded' }, 403],
      ];
      for (const [name, headers, status] of attempts) {
        const before = await snapshot();
        const res = await h.request(path, { method: 'POST', token: null, headers, body: 'reason=forged' });
        expect(res.status, `${route}: ${name}`).toBe(status);
        expect(await snapshot(), `${route}: ${name}`).toEqual(before);
      }
    }
    const [alertRow] = await h.sql`select resolved_at from worker.alerts where id = ${alert}`;
    expect(alertRow!.resolved_at).toBeNull();
  });
});
