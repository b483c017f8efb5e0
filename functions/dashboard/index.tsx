import { Hono, type Context, type MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import {
  cancelJob, failJobPermanently, isInProgress, JOB_STATUSES, readLeaderLease, requeueJob, type JobStatus,
} from '../../queue/index.ts';
import { scopesOf } from '../http/auth.ts';
import { archivedLog, readArchivedLog } from '../http/archived-log.ts';
import { SCHEDULES } from '../schedules.ts';
import { invocationOf } from '../http/context.ts';
import { HttpError, toHttpError } from '../http/errors.ts';
import { SECURITY_HEADERS } from './layout.tsx';
import { HISTORY_WINDOWS, HistoryPage, type HistoryWindow } from './history-page.tsx';
import { JobPage } from './job-page.tsx';
import { jobWorkflowRoutes } from './job-workflow-routes.tsx';
import { CHILDREN_SHOWN } from './job-workflow.tsx';
import { operatorRoutes } from './operator-routes.tsx';
import { JobsPage } from './jobs-page.tsx';
import { liveLog } from './live-log.ts';
import { OverviewPage } from './overview-page.tsx';
import { ErrorPage, LoginPage } from './pages.tsx';
import {
  countsByStatus, depthSince, getJob, inProgressJobs, jobFamily, jobTypes, jobWait, listJobs, openAlerts, pastDeadlineJobs, resolveAlert, scheduleReports, stepSeries,
} from './queries.ts';
import { SchedulesPage } from './schedules-page.tsx';
import { PAGE_SIZE, readSearch } from './search.ts';
import {
  clearSessionCookie, createSession, endAllSessions, endSession, requireAction, requireSession, safeNext, sameOrigin, sessionOf,
  sessionStoreOf, setSessionCookie, type DashboardEnv,
} from './session.ts';

/**
 * The operator dashboard, server-rendered with hono/jsx: `GET /` and everything under
 * `/dashboard/` (so it never shadows an API route). Pages reload themselves every 10 s for live
 * numbers; the one script is a running build's live log (live-log.ts); actions are plain form
 * posts (session + same origin + CSRF token) answered with a redirect back to the page.
 */
export const dashboard = new Hono<DashboardEnv>();

const DEPTH_WINDOW_MS = 6 * 3_600_000;
/** Rows of the overview's past-deadline table (its heading counts them all). */
const PAST_DEADLINE_SHOWN = 20;
/** Rows of the overview's in-progress table (its heading counts them all). */
const IN_PROGRESS_SHOWN = 50;

// A header the route set itself is kept (the build log's stricter, sandboxing CSP).
const securityHeaders: MiddlewareHandler<DashboardEnv> = async (c, next) => {
  await next();
  for (const [k, v] of Object.entries(SECURITY_HEADERS)) if (!c.res.headers.has(k)) c.header(k, v);
};
dashboard.use('/', securityHeaders);
dashboard.use('/dashboard/*', securityHeaders);
dashboard.use('/dashboard/*', bodyLimit({ maxSize: 16 * 1024, onError: (c) => c.html(<ErrorPage status={413} message="the form is larger than 16384 bytes" />, 413) }));

dashboard.onError((error, c) => {
  const known = toHttpError(error);
  if (!known) {
    console.error(JSON.stringify({ level: 'error', msg: 'dashboard error', error: (error as Error)?.message ?? String(error) }));
  }
  const status = known?.status ?? 500;
  for (const [k, v] of Object.entries(SECURITY_HEADERS)) c.header(k, v);
  return c.html(<ErrorPage status={status} message={known?.message ?? 'internal error'} />, status);
});

async function lease(c: Context<DashboardEnv>) {
  return readLeaderLease((await invocationOf(c)).sql);
}

dashboard.get('/dashboard/login', async (c) =>
  c.html(<LoginPage next={safeNext(c.req.query('next'))} notice={c.req.query('done') === 'everywhere' ? 'Every session has ended.' : undefined} />),
);

dashboard.post('/dashboard/login', async (c) => {
  if (!sameOrigin(c)) throw new HttpError(403, 'forbidden', 'log in from the dashboard itself');
  const form = await c.req.parseBody();
  const next = safeNext(typeof form.next === 'string' ? form.next : undefined);
  const token = typeof form.token === 'string' ? form.token.trim() : '';
  const scopes = await scopesOf(c.env, `Bearer ${token}`);
  if (!scopes?.includes('admin')) {
    return c.html(<LoginPage next={next} error="That is not the admin token." />, 401);
  }
  const { cookie } = await createSession(await sessionStoreOf(c));
  setSessionCookie(c, cookie);
  return c.redirect(next, 303);
});

/** Ends this session server-side: its cookie is refused from now on, wherever a copy of it is. */
dashboard.post('/dashboard/logout', requireAction(), async (c) => {
  await endSession(await sessionStoreOf(c), sessionOf(c));
  clearSessionCookie(c);
  return c.redirect('/dashboard/login', 303);
});

/** Ends every dashboard session (a cookie that may have leaked, a shared machine): everyone logs in again. */
dashboard.post('/dashboard/logout-everywhere', requireAction(), async (c) => {
  await endAllSessions(await sessionStoreOf(c));
  clearSessionCookie(c);
  return c.redirect('/dashboard/login?done=everywhere', 303);
});

dashboard.get('/', requireSession(), async (c) => {
  const inv = await invocationOf(c);
  const status = c.req.query('status');
  const type = c.req.query('type');
  const filter = {
    status: JOB_STATUSES.includes(status as JobStatus) ? (status as JobStatus) : undefined,
    type: type && /^[a-z][a-z0-9_]{0,62}$/.test(type) ? type : undefined,
    inProgress: c.req.query('inProgress') === 'true' ? true : undefined,
  };
  const [counts, depth, inProgress, recent, types, leaseRow, alerts, pastDeadline, [clock]] = await Promise.all([
    countsByStatus(inv.sql),
    depthSince(inv.sql, DEPTH_WINDOW_MS),
    inProgressJobs(inv.sql, { limit: IN_PROGRESS_SHOWN }),
    listJobs(inv.sql, { ...filter, limit: PAGE_SIZE }),
    jobTypes(inv.sql),
    readLeaderLease(inv.sql),
    openAlerts(inv.sql),
    pastDeadlineJobs(inv.sql, { limit: PAST_DEADLINE_SHOWN }),
    inv.sql`select now() as now`,
  ]);
  return c.html(
    <OverviewPage
      now={clock!.now as Date}
      csrf={sessionOf(c).csrf}
      counts={counts}
      depth={depth}
      depthWindowMs={DEPTH_WINDOW_MS}
      inProgress={inProgress}
      stuckMs={inv.config.stuckJobMs}
      recent={recent.jobs}
      nextCursor={recent.nextCursor}
      filter={filter}
      types={types}
      lease={leaseRow}
      alerts={alerts}
      pastDeadline={pastDeadline}
      scrub={inv.scrub}
      notice={c.req.query('done') === 'resolved' ? 'Alert resolved.' : undefined}
    />,
  );
});

async function renderJob(c: Context<DashboardEnv>, id: string, message: { done?: string; error?: string } = {}, status: 200 | 400 | 409 = 200) {
  const inv = await invocationOf(c);
  const found = await getJob(inv.sql, id);
  if (!found) throw new HttpError(404, 'not_found', `no job ${id}`);
  const [clock] = await inv.sql`select now() as now`;
  const [wait, family] = await Promise.all([jobWait(inv.sql, found.job.id), jobFamily(inv.sql, found.job.id, { limit: CHILDREN_SHOWN })]);
  const buildLog = found.job.type === 'build' && (found.job.startedAt || isInProgress(found.job)) ? await readArchivedLog(c.env, found.job) : undefined;
  return c.html(
    <JobPage now={clock!.now as Date} csrf={sessionOf(c).csrf} lease={await lease(c)} job={found.job} events={found.events} workflow={{ wait, family }} scrub={inv.scrub} buildLog={buildLog} {...message} />,
    status,
  );
}

async function now(c: Context<DashboardEnv>): Promise<Date> {
  const [clock] = await (await invocationOf(c)).sql`select now() as now`;
  return clock!.now as Date;
}

/** Every job a page at a time, with search (functions/dashboard/search.ts says what the box reads). */
dashboard.get('/dashboard/jobs', requireSession(), async (c) => {
  const inv = await invocationOf(c);
  const search = readSearch(c.req.query());
  // A page searching for a secret would carry it (the box, the next page's link): refused, not shown.
  if (inv.scrub(search.shown.q) !== search.shown.q) throw new HttpError(400, 'invalid_input', 'q holds a secret value: search by something else', 'q');
  if (search.kind === 'id') {
    const found = await getJob(inv.sql, search.id!);
    if (found) return c.redirect(`/dashboard/jobs/${found.job.id}`, 303);
  }
  const [page, types, leaseRow, at] = await Promise.all([
    search.kind === 'id' ? { jobs: [], nextCursor: null } : listJobs(inv.sql, search.list),
    jobTypes(inv.sql),
    lease(c),
    now(c),
  ]);
  return c.html(<JobsPage now={at} csrf={sessionOf(c).csrf} lease={leaseRow} search={search} types={types} jobs={page.jobs} nextCursor={page.nextCursor} scrub={inv.scrub} />);
});

dashboard.get('/dashboard/schedules', requireSession(), async (c) => {
  const inv = await invocationOf(c);
  const at = await now(c);
  const [schedules, leaseRow] = await Promise.all([scheduleReports(inv.sql, SCHEDULES, { now: at, graceMs: inv.config.scheduleGraceMs }), lease(c)]);
  return c.html(<SchedulesPage now={at} csrf={sessionOf(c).csrf} lease={leaseRow} schedules={schedules} graceMs={inv.config.scheduleGraceMs} />);
});

/** Throughput, failure rate and step latency per type over time (worker.step_minutes, 0230). */
dashboard.get('/dashboard/history', requireSession(), async (c) => {
  const inv = await invocationOf(c);
  const asked = c.req.query('window') ?? '6h';
  const window: HistoryWindow = asked in HISTORY_WINDOWS ? (asked as HistoryWindow) : '6h';
  const at = await now(c);
  const { ms, binMinutes } = HISTORY_WINDOWS[window];
  const [series, leaseRow] = await Promise.all([stepSeries(inv.sql, { sinceMs: ms, binMinutes, now: at }), lease(c)]);
  return c.html(<HistoryPage now={at} csrf={sessionOf(c).csrf} lease={leaseRow} window={window} series={series} />);
});

dashboard.route('/', liveLog); // a running build's live log: its socket and the page's script

dashboard.get('/dashboard/jobs/:id', requireSession(), (c) => renderJob(c, c.req.param('id'), { done: c.req.query('done') }));

/**
 * A build's archived log, for the dashboard's session: the API's /v1/builds/:id/logs takes bearer
 * tokens only, which a browser following a link does not send. Plain text; while the build runs
 * it is what has been archived so far (reload for more; the API's WebSocket streams it live).
 */
dashboard.get('/dashboard/builds/:id/log', requireSession(), async (c) => {
  const id = c.req.param('id');
  const found = await getJob((await invocationOf(c)).sql, id);
  if (!found || found.job.type !== 'build') throw new HttpError(404, 'not_found', `no build ${id}`);
  return archivedLog(c, found.job);
});

/** Runs a manual operation; a 409 (not allowed from this status) re-renders the page with the reason. */
async function jobAction(c: Context<DashboardEnv>, name: string, act: () => Promise<unknown>) {
  const id = c.req.param('id')!;
  try {
    await act();
  } catch (error) {
    const known = toHttpError(error);
    if (known && (known.status === 409 || known.status === 400)) return renderJob(c, id, { error: known.message }, 409);
    throw error;
  }
  return c.redirect(`/dashboard/jobs/${id}?done=${name}`, 303);
}

dashboard.post('/dashboard/jobs/:id/cancel', requireAction(), async (c) => {
  const inv = await invocationOf(c);
  return jobAction(c, 'cancel', async () => {
    const job = await cancelJob(inv.sql, c.req.param('id'), 'cancelled from the dashboard');
    c.set('kick', job.status !== 'cancelled'); // a started job runs its cancel hook on the next claim
  });
});

dashboard.post('/dashboard/jobs/:id/retry', requireAction(), async (c) => {
  const inv = await invocationOf(c);
  return jobAction(c, 'retry', async () => {
    await requeueJob(inv.sql, c.req.param('id'));
    c.set('kick', true);
  });
});

dashboard.post('/dashboard/jobs/:id/fail', requireAction(), async (c) => {
  const inv = await invocationOf(c);
  const form = await c.req.parseBody();
  const reason = typeof form.reason === 'string' ? form.reason.trim().slice(0, 1000) : '';
  return jobAction(c, 'fail', () => failJobPermanently(inv.sql, c.req.param('id'), reason));
});

dashboard.post('/dashboard/alerts/:id/resolve', requireAction(), async (c) => {
  const id = Number(c.req.param('id'));
  if (!Number.isSafeInteger(id) || id < 1) throw new HttpError(404, 'not_found', `no alert ${c.req.param('id')}`);
  const inv = await invocationOf(c);
  await resolveAlert(inv.sql, id);
  return c.redirect('/?done=resolved', 303);
});

dashboard.route('/', jobWorkflowRoutes(renderJob));
dashboard.route('/', operatorRoutes);
