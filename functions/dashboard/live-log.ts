import { Hono } from 'hono';
import { getJob } from '../../queue/index.ts';
import { isWebSocketUpgrade, joinBuildRelay } from '../http/build-log-socket.ts';
import { invocationOf } from '../http/context.ts';
import { HttpError } from '../http/errors.ts';
import { SECURITY_HEADERS } from './layout.tsx';
import { LIVE_LOG_SCRIPT, LIVE_LOG_SCRIPT_PATH, LIVE_LOG_SCRIPT_VERSION } from './live-log-script.ts';
import { resumeSession, sessionCookieOf, sessionStoreOf, verifySessionCookie, type DashboardEnv } from './session.ts';

/**
 * A running build's log, live on its dashboard page: the WebSocket the page's script opens, and
 * the script itself (live-log-script.ts says what it does and why it is safe).
 */
export const liveLog = new Hono<DashboardEnv>();

/**
 * The upgrade is authenticated by the session cookie, which a browser's WebSocket sends (the API's
 * route takes a bearer token, which it cannot). A cookie rides along whatever page opens the
 * socket, and a WebSocket handshake is not bound by CORS or by SameSite=Strict alone (a same-site
 * sibling origin could open it), so the Origin must be this origin exactly: another site's page
 * cannot read a build's log through an operator's session (cross-site WebSocket hijacking). A
 * refusal answers before the relay is reached, so it never gets a 101.
 */
liveLog.get('/dashboard/builds/:id/live', async (c) => {
  const id = await verifySessionCookie(c.env, sessionCookieOf(c));
  if (!id || !(await resumeSession(await sessionStoreOf(c), id))) {
    throw new HttpError(401, 'unauthorized', 'your dashboard session has ended: log in again');
  }
  if (!isWebSocketUpgrade(c.req.raw)) {
    c.header('upgrade', 'websocket');
    throw new HttpError(426, 'upgrade_required', "this is a build's live log: open it as a WebSocket (its page does)");
  }
  if (c.req.header('origin') !== new URL(c.req.url).origin) {
    throw new HttpError(403, 'forbidden', "the live log opens only from the dashboard's own pages (Origin must be this origin)");
  }
  const found = await getJob((await invocationOf(c)).sql, c.req.param('id'));
  if (!found || found.job.type !== 'build') throw new HttpError(404, 'not_found', `no build ${c.req.param('id')}`);
  const relayed = await joinBuildRelay(c.env, found.job, c.req.raw, 'reload its page for the archived log');
  if (relayed.status !== 101) return relayed;
  // The relay's answer has immutable headers; ours carries the dashboard's (so nothing rewrites it).
  return new Response(null, { status: 101, webSocket: relayed.webSocket, headers: SECURITY_HEADERS });
});

/**
 * The script, public like the login form (it holds no data). Only the URL naming the current
 * version is cached, for a year; any other answer is no-store like every dashboard answer.
 */
liveLog.get(LIVE_LOG_SCRIPT_PATH, (c) =>
  c.body(LIVE_LOG_SCRIPT, 200, {
    'content-type': 'text/javascript; charset=utf-8',
    'cache-control': c.req.query('v') === LIVE_LOG_SCRIPT_VERSION ? 'public, max-age=31536000, immutable' : 'no-store',
  }),
);
