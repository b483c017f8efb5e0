import type { Context, MiddlewareHandler } from 'hono';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import type { WorkerEnv } from '../config.ts';
import { HttpError } from '../http/errors.ts';
import type { AppEnv } from '../http/context.ts';

/**
 * The dashboard's login session: after the admin token is presented once, a cookie carries
 * `v1.<expiry>.<session id>.<HMAC>` — never the token. The HMAC key is derived (HKDF) from the
 * admin token, so rotating the token ends every session. Each session has its own CSRF token
 * (an HMAC of the session id), which every form posts back; posts must also come from the
 * dashboard's own origin.
 */
export const SESSION_COOKIE = 'starbase_session';
export const SESSION_TTL_MS = 12 * 3_600_000;

export interface DashboardSession {
  id: string;
  expiresAt: number;
  csrf: string;
}

const encoder = new TextEncoder();

function base64url(bytes: ArrayBuffer | Uint8Array): string {
  let text = '';
  for (const b of new Uint8Array(bytes)) text += String.fromCharCode(b);
  return btoa(text).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function fromBase64url(text: string): Uint8Array<ArrayBuffer> | null {
  if (!/^[A-Za-z0-9_-]*$/.test(text)) return null;
  const raw = atob(text.replace(/-/g, '+').replace(/_/g, '/') + '='.repeat((4 - (text.length % 4)) % 4));
  return Uint8Array.from(raw, (c) => c.charCodeAt(0));
}

// One derived key per admin token and isolate: HKDF costs a little, and a page load checks often.
const keys = new Map<string, Promise<CryptoKey>>();

function sessionKey(adminToken: string): Promise<CryptoKey> {
  let key = keys.get(adminToken);
  if (!key) {
    key = crypto.subtle
      .importKey('raw', encoder.encode(adminToken), 'HKDF', false, ['deriveKey'])
      .then((base) =>
        crypto.subtle.deriveKey(
          { name: 'HKDF', hash: 'SHA-256', salt: encoder.encode('starbase-worker dashboard'), info: encoder.encode('session v1') },
          base,
          { name: 'HMAC', hash: 'SHA-256', length: 256 },
          false,
          ['sign', 'verify'],
        ),
      );
    keys.clear(); // a rotated token's key is never needed again
    keys.set(adminToken, key);
  }
  return key;
}

async function mac(key: CryptoKey, text: string): Promise<string> {
  return base64url(await crypto.subtle.sign('HMAC', key, encoder.encode(text)));
}

/** Compares by verifying the MAC (constant time), never with ===. */
async function macMatches(key: CryptoKey, text: string, presented: string): Promise<boolean> {
  const bytes = fromBase64url(presented);
  return bytes !== null && bytes.length === 32 && crypto.subtle.verify('HMAC', key, bytes, encoder.encode(text));
}

function adminTokenOf(env: WorkerEnv): string {
  if (!env.ADMIN_TOKEN) {
    throw new HttpError(503, 'not_configured', 'no ADMIN_TOKEN is configured: the dashboard has no one to let in');
  }
  return env.ADMIN_TOKEN;
}

export async function createSession(env: WorkerEnv, now = Date.now()): Promise<{ cookie: string; session: DashboardSession }> {
  const key = await sessionKey(adminTokenOf(env));
  const id = base64url(crypto.getRandomValues(new Uint8Array(18)));
  const expiresAt = now + SESSION_TTL_MS;
  const body = `v1.${expiresAt}.${id}`;
  return { cookie: `${body}.${await mac(key, body)}`, session: { id, expiresAt, csrf: await mac(key, `csrf.${id}`) } };
}

export async function readSession(env: WorkerEnv, cookie: string | undefined, now = Date.now()): Promise<DashboardSession | null> {
  if (!cookie || !env.ADMIN_TOKEN) return null;
  const m = /^(v1\.(\d{1,15})\.([A-Za-z0-9_-]{24}))\.([A-Za-z0-9_-]{43})$/.exec(cookie);
  if (!m) return null;
  const key = await sessionKey(env.ADMIN_TOKEN);
  if (!(await macMatches(key, m[1]!, m[4]!))) return null;
  const expiresAt = Number(m[2]);
  if (expiresAt <= now) return null;
  return { id: m[3]!, expiresAt, csrf: await mac(key, `csrf.${m[3]}`) };
}

export async function csrfMatches(env: WorkerEnv, session: DashboardSession, presented: unknown): Promise<boolean> {
  if (typeof presented !== 'string') return false;
  return macMatches(await sessionKey(adminTokenOf(env)), `csrf.${session.id}`, presented);
}

/** __Host-: only ever set by this origin over HTTPS (browsers count http://localhost as secure), for every path. */
export function setSessionCookie(c: Context, value: string): void {
  setCookie(c, SESSION_COOKIE, value, { prefix: 'host', path: '/', httpOnly: true, secure: true, sameSite: 'Strict', maxAge: SESSION_TTL_MS / 1000 });
}

export function clearSessionCookie(c: Context): void {
  deleteCookie(c, SESSION_COOKIE, { prefix: 'host', path: '/', httpOnly: true, secure: true, sameSite: 'Strict' });
}

export function sessionCookieOf(c: Context): string | undefined {
  return getCookie(c, SESSION_COOKIE, 'host');
}

/**
 * A state-changing request must come from a page of this origin: the Origin header must be ours
 * (browsers send it with every form POST); without one, Sec-Fetch-Site must say same-origin.
 * SameSite=Strict already keeps the cookie off cross-site posts; this is the second lock.
 */
export function sameOrigin(c: Context): boolean {
  const origin = c.req.header('origin');
  if (origin) return origin === new URL(c.req.url).origin;
  return c.req.header('sec-fetch-site') === 'same-origin';
}

export type DashboardEnv = AppEnv & { Variables: AppEnv['Variables'] & { session?: DashboardSession } };

/** The session a requireSession/requireAction middleware admitted. */
export function sessionOf(c: Context<DashboardEnv>): DashboardSession {
  const session = c.get('session');
  if (!session) throw new Error('a dashboard route is missing its session middleware');
  return session;
}

/** Pages: a visitor without a session is sent to the login form (and back here after). */
export function requireSession(): MiddlewareHandler<DashboardEnv> {
  return async (c, next) => {
    const session = await readSession(c.env, sessionCookieOf(c));
    if (!session) {
      const back = new URL(c.req.url);
      return c.redirect(`/dashboard/login?next=${encodeURIComponent(back.pathname + back.search)}`, 303);
    }
    c.set('session', session);
    await next();
  };
}

/** Actions: a session, our origin, and the session's CSRF token in the form. */
export function requireAction(): MiddlewareHandler<DashboardEnv> {
  return async (c, next) => {
    const session = await readSession(c.env, sessionCookieOf(c));
    if (!session) throw new HttpError(401, 'unauthorized', 'your dashboard session has ended: log in again');
    if (!sameOrigin(c)) throw new HttpError(403, 'forbidden', 'this action must be posted from the dashboard itself');
    const form = await c.req.parseBody();
    if (!(await csrfMatches(c.env, session, form._csrf))) throw new HttpError(403, 'forbidden', 'the form is stale or forged (CSRF token mismatch): reload the page');
    c.set('session', session);
    await next();
  };
}

/** Where to go after logging in: only a path on this site, never another origin. */
export function safeNext(next: string | undefined): string {
  return next && /^\/(?![/\\])[^\s\\]*$/.test(next) ? next : '/';
}
