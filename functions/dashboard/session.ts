import type { Context, MiddlewareHandler } from 'hono';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import type { Sql } from '../../queue/index.ts';
import type { WorkerEnv } from '../config.ts';
import { HttpError } from '../http/errors.ts';
import { invocationOf, type AppEnv } from '../http/context.ts';
import { deleteAllSessions, deleteSession, insertSession, touchSession } from './session-store.ts';

/**
 * The dashboard's login session. After the admin token is presented once, a cookie carries
 * `v2.<session id>.<HMAC>` — never the token — and the session lives server-side as a row of
 * worker.dashboard_sessions (session-store.ts): it ends at once on logout (its row is deleted),
 * on "log out everywhere" (every row), after `DASHBOARD_IDLE_MS` without a request (30 min,
 * sliding), and 12 h after login whatever happens.
 *
 * The HMAC key is derived (HKDF) from its own secret, SESSION_SECRET, not from the admin token: a
 * stolen cookie must not be a way to test guesses of the admin token offline. A Worker without
 * SESSION_SECRET (or with one shorter than 32 characters) refuses to log anyone in, with an error
 * that says so, rather than fall back to another secret. Each session has its own CSRF token (an
 * HMAC of the session id), which every form posts back; posts must also come from the dashboard's
 * own origin.
 */
export const SESSION_COOKIE = 'starbase_session';
export const SESSION_TTL_MS = 12 * 3_600_000;
export const SESSION_SECRET_MIN_LENGTH = 32;

export interface DashboardSession {
  id: string;
  expiresAt: number;
  csrf: string;
}

/** Where sessions are kept, and the idle timeout (the invocation's client and config). */
export interface SessionStore {
  env: WorkerEnv;
  sql: Sql;
  idleMs: number;
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

/** The configured SESSION_SECRET, or null when there is none fit to sign with. */
function sessionSecretOf(env: WorkerEnv): string | null {
  const secret = env.SESSION_SECRET;
  return typeof secret === 'string' && secret.length >= SESSION_SECRET_MIN_LENGTH ? secret : null;
}

function requireSessionSecret(env: WorkerEnv): string {
  const secret = sessionSecretOf(env);
  if (secret) return secret;
  throw new HttpError(
    503,
    'not_configured',
    typeof env.SESSION_SECRET === 'string' && env.SESSION_SECRET !== ''
      ? `SESSION_SECRET is shorter than ${SESSION_SECRET_MIN_LENGTH} characters: the dashboard will not sign sessions with it (openssl rand -base64 32)`
      : 'no SESSION_SECRET is configured: the dashboard cannot sign login sessions (wrangler secret put SESSION_SECRET, e.g. from openssl rand -base64 32)',
  );
}

// One derived key per secret and isolate: HKDF costs a little, and a page load checks often.
const keys = new Map<string, Promise<CryptoKey>>();

function sessionKey(secret: string): Promise<CryptoKey> {
  let key = keys.get(secret);
  if (!key) {
    key = crypto.subtle
      .importKey('raw', encoder.encode(secret), 'HKDF', false, ['deriveKey'])
      .then((base) =>
        crypto.subtle.deriveKey(
          { name: 'HKDF', hash: 'SHA-256', salt: encoder.encode('starbase-worker dashboard'), info: encoder.encode('session v2') },
          base,
          { name: 'HMAC', hash: 'SHA-256', length: 256 },
          false,
          ['sign', 'verify'],
        ),
      );
    keys.clear(); // a rotated secret's key is never needed again
    keys.set(secret, key);
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

/** What the row is keyed by: the id's SHA-256, so the table holds nothing a browser could present. */
async function idHash(id: string): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest('SHA-256', encoder.encode(id)));
}

const COOKIE = /^(v2\.([A-Za-z0-9_-]{24}))\.([A-Za-z0-9_-]{43})$/;

/** The session id a cookie carries if its MAC is ours (no database read); null otherwise. */
export async function verifySessionCookie(env: WorkerEnv, cookie: string | undefined): Promise<string | null> {
  const secret = sessionSecretOf(env);
  if (!cookie || !secret) return null;
  const m = COOKIE.exec(cookie);
  if (!m) return null;
  return (await macMatches(await sessionKey(secret), m[1]!, m[3]!)) ? m[2]! : null;
}

/** A new session (a row, and the cookie naming it); 503 without a usable SESSION_SECRET. */
export async function createSession(store: SessionStore, now = new Date()): Promise<{ cookie: string; session: DashboardSession }> {
  const key = await sessionKey(requireSessionSecret(store.env));
  const id = base64url(crypto.getRandomValues(new Uint8Array(18)));
  const expiresAt = now.getTime() + SESSION_TTL_MS;
  await insertSession(store.sql, await idHash(id), now, new Date(expiresAt), store.idleMs);
  const body = `v2.${id}`;
  return { cookie: `${body}.${await mac(key, body)}`, session: { id, expiresAt, csrf: await mac(key, `csrf.${id}`) } };
}

/** The live session a verified id names, its idle timeout slid forward to `now`; null when it has ended. */
export async function resumeSession(store: SessionStore, id: string, now = new Date()): Promise<DashboardSession | null> {
  const secret = sessionSecretOf(store.env);
  if (!secret) return null;
  const expiresAt = await touchSession(store.sql, await idHash(id), now, store.idleMs);
  if (!expiresAt) return null;
  return { id, expiresAt: expiresAt.getTime(), csrf: await mac(await sessionKey(secret), `csrf.${id}`) };
}

/** The session a cookie carries, if its MAC is ours and the session is live. */
export async function readSession(store: SessionStore, cookie: string | undefined, now = new Date()): Promise<DashboardSession | null> {
  const id = await verifySessionCookie(store.env, cookie);
  return id ? resumeSession(store, id, now) : null;
}

/** Logout: this session ends at once; its cookie is refused from now on. */
export async function endSession(store: SessionStore, session: DashboardSession): Promise<void> {
  await deleteSession(store.sql, await idHash(session.id));
}

/** Log out everywhere: every session ends at once, this one included. The number ended. */
export function endAllSessions(store: SessionStore): Promise<number> {
  return deleteAllSessions(store.sql);
}

export async function csrfMatches(env: WorkerEnv, session: DashboardSession, presented: unknown): Promise<boolean> {
  if (typeof presented !== 'string') return false;
  return macMatches(await sessionKey(requireSessionSecret(env)), `csrf.${session.id}`, presented);
}

/**
 * A MAC binding `text` to this session: a form carries it beside fields the next post must send
 * back unchanged (the bulk confirm's filter), and the post checks it (sealMatches).
 */
export async function sealFor(env: WorkerEnv, session: DashboardSession, text: string): Promise<string> {
  return mac(await sessionKey(requireSessionSecret(env)), `seal.${session.id}.${text}`);
}

export async function sealMatches(env: WorkerEnv, session: DashboardSession, text: string, presented: unknown): Promise<boolean> {
  if (typeof presented !== 'string') return false;
  return macMatches(await sessionKey(requireSessionSecret(env)), `seal.${session.id}.${text}`, presented);
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

/** The request's session store: the invocation's client and the configured idle timeout. */
export async function sessionStoreOf(c: Context<DashboardEnv>): Promise<SessionStore> {
  const inv = await invocationOf(c);
  return { env: c.env, sql: inv.sql, idleMs: inv.config.dashboardIdleMs };
}

/** The request's live session, if any. A cookie whose MAC is not ours costs no database read. */
async function requestSession(c: Context<DashboardEnv>): Promise<DashboardSession | null> {
  const id = await verifySessionCookie(c.env, sessionCookieOf(c));
  return id ? resumeSession(await sessionStoreOf(c), id) : null;
}

/** Pages: a visitor without a session is sent to the login form (and back here after). */
export function requireSession(): MiddlewareHandler<DashboardEnv> {
  return async (c, next) => {
    const session = await requestSession(c);
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
    const session = await requestSession(c);
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
