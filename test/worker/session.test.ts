import { beforeAll, describe, expect, it } from 'vitest';
import { readConfig } from '../../functions/config.ts';
import { createSession, readSession, SESSION_TTL_MS, type SessionStore } from '../../functions/dashboard/session.ts';
import { createWorkerHarness, TOKENS, type WorkerHarness } from './support.ts';

/**
 * Dashboard sessions are server-side (worker.dashboard_sessions): logout and "log out everywhere"
 * end them at once, an idle one ends after DASHBOARD_IDLE_MS, and cookies are signed with a key
 * from SESSION_SECRET alone — never from the admin token.
 */
const ORIGIN = 'http://worker.test';
const IDLE_MS = 30 * 60_000;

let h: WorkerHarness;
beforeAll(async () => {
  h = await createWorkerHarness();
});

const store = (): SessionStore => ({ env: h.env, sql: h.sql, idleMs: IDLE_MS });

async function login(harness = h): Promise<{ status: number; cookie: string; text: string }> {
  const res = await harness.request('/dashboard/login', {
    method: 'POST',
    token: null,
    headers: { origin: ORIGIN, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ token: TOKENS.admin, next: '/' }).toString(),
  });
  const cookie = /^__Host-starbase_session=([^;]+)/.exec(res.headers.get('set-cookie') ?? '')?.[1] ?? '';
  return { status: res.status, cookie, text: await res.text() };
}

async function get(path: string, cookie: string, harness = h) {
  const res = await harness.request(path, { token: null, headers: { cookie: `__Host-starbase_session=${cookie}` } });
  return { status: res.status, location: res.headers.get('location'), text: await res.text() };
}

/** The page's CSRF token, for posting as this session. */
async function csrfOf(cookie: string): Promise<string> {
  const page = await get('/', cookie);
  expect(page.status).toBe(200);
  return /name="_csrf" value="([A-Za-z0-9_-]{43})"/.exec(page.text)![1]!;
}

async function post(path: string, cookie: string, form: Record<string, string> = {}) {
  const res = await h.request(path, {
    method: 'POST',
    token: null,
    headers: { origin: ORIGIN, cookie: `__Host-starbase_session=${cookie}`, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(form).toString(),
  });
  return { status: res.status, location: res.headers.get('location'), setCookie: res.headers.get('set-cookie'), text: await res.text() };
}

const refused = (res: { status: number; location: string | null }) => res.status === 303 && (res.location ?? '').startsWith('/dashboard/login');

describe('logout', () => {
  it('refuses the old cookie right after logout, on pages and on actions', async () => {
    const { cookie } = await login();
    const csrf = await csrfOf(cookie);
    const out = await post('/dashboard/logout', cookie, { _csrf: csrf });
    expect(out.status).toBe(303);
    expect(out.location).toBe('/dashboard/login');
    // a copy of the cookie (another tab, a thief) is dead too, not just the browser's deleted one
    expect(refused(await get('/', cookie))).toBe(true);
    expect(refused(await get('/dashboard/jobs/00000000-0000-4000-8000-000000000000', cookie))).toBe(true);
    expect((await post('/dashboard/logout', cookie, { _csrf: csrf })).status).toBe(401);
  });

  it('log out everywhere ends every other session too', async () => {
    const sessions = await Promise.all([login(), login(), login()]);
    for (const s of sessions) expect((await get('/', s.cookie)).status).toBe(200);
    const [mine, ...others] = sessions.map((s) => s.cookie) as [string, ...string[]];
    const out = await post('/dashboard/logout-everywhere', mine, { _csrf: await csrfOf(mine) });
    expect(out.status).toBe(303);
    expect(out.location).toBe('/dashboard/login?done=everywhere');
    expect(out.setCookie).toMatch(/^__Host-starbase_session=; Max-Age=0/);
    for (const cookie of [mine, ...others]) expect(refused(await get('/', cookie))).toBe(true);
    expect(await h.sql`select count(*)::int as n from worker.dashboard_sessions`).toEqual([{ n: 0 }]);
    expect((await get('/dashboard/login?done=everywhere', '')).text).toContain('Every session has ended.');
    // and a fresh login works again
    expect((await get('/', (await login()).cookie)).status).toBe(200);
  });

  it('log out everywhere is an action: it needs a session, our origin and the CSRF token', async () => {
    const { cookie } = await login();
    expect((await post('/dashboard/logout-everywhere', '', {})).status).toBe(401);
    expect((await post('/dashboard/logout-everywhere', cookie, { _csrf: 'A'.repeat(43) })).status).toBe(403);
    expect((await get('/', cookie)).status).toBe(200);
  });
});

describe('the idle timeout', () => {
  it('ends a session unused for DASHBOARD_IDLE_MS; each use slides it forward (pinned clock)', async () => {
    const t0 = Date.parse('2026-05-01T08:00:00Z');
    const at = (minutes: number) => new Date(t0 + minutes * 60_000);
    const { cookie } = await createSession(store(), at(0));
    expect(await readSession(store(), cookie, at(29))).not.toBeNull();
    expect(await readSession(store(), cookie, at(58))).not.toBeNull(); // 29 min after the last use
    expect(await readSession(store(), cookie, at(87))).not.toBeNull();
    expect(await readSession(store(), cookie, at(87 + 30))).toBeNull(); // 30 min idle: over
    expect(await readSession(store(), cookie, at(88))).toBeNull(); // and it stays over
    // the absolute limit holds however busy the session is
    const busy = await createSession(store(), at(0));
    for (let m = 0; m < SESSION_TTL_MS / 60_000; m += 25) expect(await readSession(store(), busy.cookie, at(m)), `minute ${m}`).not.toBeNull();
    expect(await readSession(store(), busy.cookie, at(SESSION_TTL_MS / 60_000))).toBeNull();
  });

  it('is read from DASHBOARD_IDLE_MS: a session whose last use is older is sent to the login form', async () => {
    const short = await createWorkerHarness({ DASHBOARD_IDLE_MS: '60000' } as never);
    const { cookie } = await login(short);
    expect((await get('/', cookie, short)).status).toBe(200);
    // move the session's clock: its last use 59 s ago is fine, 61 s ago is not
    await short.sql`update worker.dashboard_sessions set last_seen_at = now() - interval '59 seconds'`;
    expect((await get('/', cookie, short)).status).toBe(200);
    await short.sql`update worker.dashboard_sessions set last_seen_at = now() - interval '61 seconds'`;
    expect(refused(await get('/', cookie, short))).toBe(true);
  });

  it('defaults to 30 minutes and refuses a setting out of range, naming it', () => {
    expect(readConfig(h.env).dashboardIdleMs).toBe(30 * 60_000);
    expect(readConfig({ ...h.env, DASHBOARD_IDLE_MS: '120000' }).dashboardIdleMs).toBe(120_000);
    for (const bad of ['0', '59999', '43200001', 'soon', '1.5']) {
      expect(() => readConfig({ ...h.env, DASHBOARD_IDLE_MS: bad }), bad).toThrow(/DASHBOARD_IDLE_MS/);
    }
  });
});

describe('the session key', () => {
  const encoder = new TextEncoder();
  const b64url = (bytes: ArrayBuffer) => btoa(String.fromCharCode(...new Uint8Array(bytes))).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');

  /** The key the dashboard used to sign with: HKDF of the admin token alone. */
  async function adminDerivedKey(info: string): Promise<CryptoKey> {
    const base = await crypto.subtle.importKey('raw', encoder.encode(TOKENS.admin), 'HKDF', false, ['deriveKey']);
    return crypto.subtle.deriveKey(
      { name: 'HKDF', hash: 'SHA-256', salt: encoder.encode('starbase-worker dashboard'), info: encoder.encode(info) },
      base,
      { name: 'HMAC', hash: 'SHA-256', length: 256 },
      false,
      ['sign'],
    );
  }
  const sign = async (key: CryptoKey, body: string) => `${body}.${b64url(await crypto.subtle.sign('HMAC', key, encoder.encode(body)))}`;

  it('refuses a cookie forged with a key derived from the admin token, even for a live session id', async () => {
    const { cookie } = await login();
    expect((await get('/', cookie)).status).toBe(200);
    const liveId = cookie.split('.').find((part) => /^[A-Za-z0-9_-]{24}$/.test(part))!; // the session id, in either cookie format
    const expiry = Date.now() + 3_600_000;
    for (const info of ['session v1', 'session v2']) {
      const key = await adminDerivedKey(info);
      for (const forged of [await sign(key, `v1.${expiry}.${liveId}`), await sign(key, `v2.${liveId}`)]) {
        expect(refused(await get('/', forged)), `${info}: ${forged}`).toBe(true);
      }
    }
    expect((await get('/', cookie)).status).toBe(200); // the real cookie still works
  });

  it('without SESSION_SECRET (or with a short one) the dashboard refuses to log anyone in, saying why', async () => {
    for (const [secret, message] of [
      [undefined, 'no SESSION_SECRET is configured'],
      ['', 'no SESSION_SECRET is configured'],
      ['too-short-secret', 'SESSION_SECRET is shorter than 32 characters'],
    ] as const) {
      const unset = await createWorkerHarness({ SESSION_SECRET: secret } as never);
      const res = await login(unset);
      expect(res.status, String(secret)).toBe(503);
      expect(res.cookie).toBe('');
      expect(res.text).toContain(message);
      expect(await unset.sql`select count(*)::int as n from worker.dashboard_sessions`).toEqual([{ n: 0 }]);
    }
  });

  it('stores a hash of the session id, never the id a cookie carries', async () => {
    const { cookie } = await login();
    const id = cookie.split('.')[1]!;
    const rows = await h.sql`select encode(id_hash, 'hex') as hash from worker.dashboard_sessions`;
    const expected = Array.from(new Uint8Array(await crypto.subtle.digest('SHA-256', encoder.encode(id))), (b) => b.toString(16).padStart(2, '0')).join('');
    expect(rows.map((r) => r.hash)).toContain(expected);
    const [dump] = await h.sql`select string_agg(t::text, ' ') as text from worker.dashboard_sessions t`;
    expect(dump!.text).not.toContain(id);
  });
});
