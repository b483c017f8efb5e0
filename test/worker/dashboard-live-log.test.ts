import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { archiveKey } from '../../functions/platform/build/adapters/r2-log-archive.ts';
import { endSession, readSession } from '../../functions/dashboard/session.ts';
import { LIVE_LOG_SCRIPT, LIVE_LOG_SCRIPT_PATH, LIVE_LOG_SCRIPT_URL } from '../../functions/dashboard/live-log-script.ts';
import { createWorkerHarness, relayMessages, sandboxBuildEnv, testEnv, TOKENS, type WorkerHarness } from './support.ts';

/**
 * A running build's live log on its dashboard page: GET /dashboard/builds/:id/live joins the
 * build's relay with the session cookie (never a bearer token) and only from the dashboard's own
 * origin; the page loads the one script the CSP allows, from this origin, and nothing inline.
 */
const ORIGIN = 'http://worker.test';
const TICK = '* * * * *';
const sandbox = testEnv.TEST_SANDBOX_URL;
type Json = Record<string, any>;

let h: WorkerHarness;
let cookie = '';
beforeAll(async () => {
  h = await createWorkerHarness(sandboxBuildEnv());
  cookie = await login();
});

beforeEach(async () => {
  await h.sql`update worker.jobs set status = 'cancelled', finished_at = now() where status = 'queued' and started_at is null`;
});

async function login(): Promise<string> {
  const res = await h.request('/dashboard/login', {
    method: 'POST',
    token: null,
    headers: { origin: ORIGIN, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ token: TOKENS.admin, next: '/' }).toString(),
  });
  return /^__Host-starbase_session=([^;]+)/.exec(res.headers.get('set-cookie') ?? '')![1]!;
}

/** What a browser's WebSocket sends: the cookie, its page's Origin, the upgrade; never a bearer token. */
function openLive(id: string, init: { cookie?: string | null; origin?: string | null; upgrade?: boolean } = {}) {
  const headers: Record<string, string> = {};
  const jar = init.cookie === undefined ? cookie : init.cookie;
  if (jar) headers.cookie = `__Host-starbase_session=${jar}`;
  const origin = init.origin === undefined ? ORIGIN : init.origin;
  if (origin) headers.origin = origin;
  if (init.upgrade !== false) Object.assign(headers, { upgrade: 'websocket', connection: 'Upgrade', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==' });
  return h.request(`/dashboard/builds/${id}/live`, { token: null, headers });
}

async function buildJob(script: Json): Promise<string> {
  const svc = `svc-live-${crypto.randomUUID().slice(0, 8)}`;
  await h.sql`insert into platform.accounts (id) values ('acct-live') on conflict do nothing`;
  await h.sql`insert into platform.services (id, account_id) values (${svc}, 'acct-live')`;
  const scripted = await fetch(`${sandbox}/_sandbox/depot/script`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ serviceId: svc, ...script }) });
  expect(scripted.status).toBe(200);
  const res = await h.request('/v1/pushes', { method: 'POST', token: 'enqueue', json: { accountId: 'acct-live', serviceId: svc, branch: 'main', commitSha: 'abc1234' } });
  expect(res.status).toBe(201);
  return ((await res.json()) as { job: { id: string } }).job.id;
}

/** A job of any type, due in an hour (no tick runs it): the rows the pages and the refusals are about. */
async function enqueued(type: string, payload: Json): Promise<string> {
  const [row] = await h.sql`select id from worker.enqueue_job(type => ${type}, payload => ${h.sql.json(payload)}, run_at => now() + interval '1 hour')`;
  return row!.id as string;
}

describe('GET /dashboard/builds/:id/live', () => {
  it('with the session and our Origin: 101, then the lines each poll step publishes, then the end; to every viewer', async () => {
    const id = await buildJob({ outcome: 'succeed', polls: 2, lines: 7 });
    // two operators (two sessions) watch the same build at once
    const viewers = await Promise.all([openLive(id), openLive(id, { cookie: await login() })]);
    expect(viewers.map((r) => r.status)).toEqual([101, 101]);
    const streams = viewers.map(relayMessages);
    await h.sql`update worker.jobs set run_at = now() where id = ${id}`;
    await h.trigger(TICK);
    for (const { received, ended } of streams) {
      await ended;
      // more than one poll published: the lines arrive as they are read, not at the end
      expect(received.filter((m) => m.type === 'lines').length).toBeGreaterThan(1);
      expect(received.filter((m) => m.type === 'lines').flatMap((m) => m.lines).map((l: Json) => l.seq)).toEqual([1, 2, 3, 4, 5, 6, 7]);
      expect(received.at(-1)).toEqual({ type: 'end', outcome: 'succeeded' });
    }
  });

  it('refuses without a live session (no cookie, a forged one, a logged-out one): 401, never a 101', async () => {
    const id = await buildJob({ outcome: 'hang', polls: 1, lines: 2 });
    const body = cookie.slice(0, cookie.lastIndexOf('.'));
    const ended = await login();
    const store = { env: h.env, sql: h.sql, idleMs: 30 * 60_000 };
    await endSession(store, (await readSession(store, ended))!); // what Log out does
    for (const [what, jar] of [['no cookie', null], ['forged MAC', `${body}.${'A'.repeat(43)}`], ['ended session', ended], ['the admin token as cookie', TOKENS.admin]] as const) {
      const res = await openLive(id, { cookie: jar });
      expect(res.status, what).toBe(401);
      expect(res.webSocket, what).toBeFalsy();
      expect(await res.text(), what).toContain('log in again');
    }
    // a bearer token is not a session either: the dashboard's socket takes cookies only
    const bearer = await h.request(`/dashboard/builds/${id}/live`, { token: 'admin', headers: { origin: ORIGIN, upgrade: 'websocket' } });
    expect(bearer.status).toBe(401);
  });

  it('refuses another Origin, a sibling subdomain, another scheme and no Origin at all: 403', async () => {
    const id = await buildJob({ outcome: 'hang', polls: 1, lines: 2 });
    for (const origin of ['https://evil.example', 'http://evil.worker.test', 'https://worker.test', 'http://worker.test:8080', 'null', null]) {
      const res = await openLive(id, { origin });
      expect(res.status, String(origin)).toBe(403);
      expect(res.webSocket, String(origin)).toBeFalsy();
    }
  });

  it('answers 404 for a job that is no build and an id that is no job, 426 without an upgrade, 410 once the build ended', async () => {
    const other = await enqueued('uppercase', { text: 'not a build' });
    expect((await openLive(other)).status).toBe(404);
    expect((await openLive('00000000-0000-4000-8000-000000000000')).status).toBe(404);
    expect((await openLive('not-a-uuid')).status).toBe(404);
    const build = await enqueued('build', { accountId: 'acct-live', serviceId: 'svc', branch: 'main', commitSha: 'abc1234' });
    const plain = await openLive(build, { upgrade: false });
    expect(plain.status).toBe(426);
    expect(plain.headers.get('upgrade')).toBe('websocket');
    await h.sql`update worker.jobs set status = 'done', finished_at = now() where id = ${build}`;
    const finished = await openLive(build);
    expect(finished.status).toBe(410);
    expect(finished.webSocket).toBeFalsy();
  });
});

describe("a running build's page", () => {
  it('loads the one script from this origin, runs nothing inline, and has no meta refresh while the script can run', async () => {
    const id = await enqueued('build', { accountId: 'acct-live', serviceId: 'svc', branch: 'main', commitSha: 'abc1234' });
    await h.sql`update worker.jobs set started_at = now(), step = 'poll' where id = ${id}`;
    await (h.env.BUILD_LOGS as unknown as R2Bucket).put(archiveKey(id), 'one\n<img src=x onerror=alert(1)>\n', { customMetadata: { lastSeq: '2' } });
    const res = await h.request(`/dashboard/jobs/${id}`, { token: null, headers: { cookie: `__Host-starbase_session=${cookie}` } });
    expect(res.status).toBe(200);
    const html = await res.text();
    const csp = res.headers.get('content-security-policy')!;
    const directive = (name: string) => csp.split(';').map((d) => d.trim()).find((d) => d.startsWith(`${name} `));
    expect(directive('default-src')).toBe("default-src 'none'");
    expect(directive('script-src')).toBe("script-src 'self'"); // no 'unsafe-inline', no 'unsafe-eval', no host, no hash
    expect(directive('connect-src')).toBe("connect-src 'self'");
    expect(directive('require-trusted-types-for')).toBe("require-trusted-types-for 'script'");
    expect(directive('frame-ancestors')).toBe("frame-ancestors 'none'");

    // one script element, with a same-origin src and no body; no handler attributes anywhere
    const scripts = [...html.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/g)];
    expect(scripts.map((s) => [s[1], s[2]])).toEqual([[` src="${LIVE_LOG_SCRIPT_URL.replace(/&/g, '&amp;')}" defer=""`, '']]);
    expect(LIVE_LOG_SCRIPT_URL).toMatch(/^\/dashboard\/assets\/live-log\.js\?v=[0-9a-f]{8}$/);
    expect(html).not.toMatch(/<[a-z][^>]*\son[a-z]+=/i); // in a tag (escaped text cannot open one)
    expect(html).toContain('&lt;img src=x onerror=alert(1)&gt;'); // the hostile line, escaped
    // the socket's path and where the tail ends, for the script
    expect(html).toContain(`id="build-log-panel" data-live="/dashboard/builds/${id}/live"`);
    expect(html).toMatch(/<pre class="json log" id="build-log-tail" data-lines="2" data-last-seq="2">one\n&lt;img/);
    // no refresh of its own (the script reloads on a failed socket); one for a browser without scripts
    expect(html.slice(0, html.indexOf('</head>'))).not.toContain('refresh');
    expect(html.match(/http-equiv="refresh"/g)).toHaveLength(1);
    expect(html).toContain('<noscript><meta http-equiv="refresh" content="10"></noscript>');

    // a finished build's page: no script, no socket, no refresh
    await h.sql`update worker.jobs set status = 'done', finished_at = now() where id = ${id}`;
    const done = await (await h.request(`/dashboard/jobs/${id}`, { token: null, headers: { cookie: `__Host-starbase_session=${cookie}` } })).text();
    expect(done).not.toContain('<script');
    expect(done).not.toContain('data-live=');
    expect(done).not.toContain('refresh');
  });

  it('a page before the build started reloads as before, with no script', async () => {
    const id = await enqueued('build', { accountId: 'acct-live', serviceId: 'svc', branch: 'main', commitSha: 'abc1234' });
    const html = await (await h.request(`/dashboard/jobs/${id}`, { token: null, headers: { cookie: `__Host-starbase_session=${cookie}` } })).text();
    expect(html).toContain('<meta http-equiv="refresh" content="10"/>');
    expect(html).not.toContain('<script');
  });
});

describe('the script asset', () => {
  it('is served from this origin as JavaScript, cached for a year at its versioned URL only', async () => {
    const res = await h.request(LIVE_LOG_SCRIPT_URL, { token: null });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(res.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(await res.text()).toBe(LIVE_LOG_SCRIPT);
    for (const path of [LIVE_LOG_SCRIPT_PATH, `${LIVE_LOG_SCRIPT_PATH}?v=00000000`]) {
      const other = await h.request(path, { token: null });
      expect(other.status, path).toBe(200);
      expect(other.headers.get('cache-control'), path).toBe('no-store'); // an old or missing version is never kept
    }
  });

  it('adds lines as text nodes only: no HTML sink, no eval, no other origin', () => {
    for (const sink of ['innerHTML', 'outerHTML', 'insertAdjacentHTML', 'document.write', 'eval(', 'Function(', 'setTimeout(\'', 'srcdoc', 'javascript:']) {
      expect(LIVE_LOG_SCRIPT, sink).not.toContain(sink);
    }
    expect(LIVE_LOG_SCRIPT).toContain('document.createTextNode(');
    expect(LIVE_LOG_SCRIPT).not.toMatch(/(https?|wss?):\/\//);
  });
});
