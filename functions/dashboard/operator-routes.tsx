import { Hono, type Context } from 'hono';
import { bulkCancel, bulkRequeue, pauseClaims, readLeaderLease, resumeClaims } from '../../queue/index.ts';
import { invocationOf } from '../http/context.ts';
import { HttpError, toHttpError } from '../http/errors.ts';
import { bulkFields, prefillFromQuery, readBulkForm, sealText, type BulkRequest } from './bulk-form.ts';
import { BulkPage, type BulkPageData } from './bulk-page.tsx';
import { DeadLettersPage } from './dead-letters-page.tsx';
import { FlowPage, type FlowPageData } from './flow-page.tsx';
import { choiceField, textField, type FormBody } from './forms.ts';
import { bulkSample, deadLetters, jobTypes, listPauses, listRateLimits } from './queries.ts';
import { requireAction, requireSession, sealFor, sealMatches, sessionOf, type DashboardEnv } from './session.ts';

/**
 * The operator's flow-control, dead-letter and bulk pages. Actions are form posts behind
 * requireAction (session, our origin, the CSRF token); a refusal (bad input 400, the engine's
 * 404/409) shows the page again with the reason and writes nothing.
 */
export const operatorRoutes = new Hono<DashboardEnv>();

/**
 * Jobs one confirm walks (in batches of 500); past it the page offers to go on, as the API answers
 * nextCursor. Fewer than the API's 5000: a requeue cost about 2.4 ms of database time a job in
 * the tests (5000 in 12 s, on a loaded machine), and a browser waits for the page.
 */
export const BULK_MAX_JOBS = 2000;
const SAMPLE_SIZE = 10;
const CURSOR = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** What every page's top bar needs, and the job types its forms offer. */
async function basics(c: Context<DashboardEnv>) {
  const inv = await invocationOf(c);
  const [[clock], lease, types] = await Promise.all([inv.sql`select now() as now`, readLeaderLease(inv.sql), jobTypes(inv.sql)]);
  return { sql: inv.sql, page: { now: clock!.now as Date, lease, types, csrf: sessionOf(c).csrf, scrub: inv.scrub } };
}

/** A 400/404/409 the action raised, its message scrubbed (it may quote what was typed), or rethrown. */
async function refusal(c: Context<DashboardEnv>, error: unknown): Promise<{ status: 400 | 404 | 409; message: string }> {
  const known = toHttpError(error);
  if (known && (known.status === 400 || known.status === 404 || known.status === 409)) return { status: known.status, message: (await invocationOf(c)).scrub(known.message) };
  throw error;
}

// ---- flow control ----

async function renderFlow(c: Context<DashboardEnv>, extra: Pick<FlowPageData, 'notice' | 'error' | 'shown'> = {}, status: 200 | 400 | 404 | 409 = 200) {
  const { sql, page } = await basics(c);
  const [pauses, rateLimits] = await Promise.all([listPauses(sql), listRateLimits(sql, { now: page.now })]);
  return c.html(<FlowPage {...page} pauses={pauses} rateLimits={rateLimits} {...extra} />, status);
}

const FLOW_NOTICES: Record<string, string> = { paused: 'Paused: claims skip it until it is resumed.', resumed: 'Resumed: claims take it again.' };

operatorRoutes.get('/dashboard/flow', requireSession(), (c) => renderFlow(c, { notice: FLOW_NOTICES[c.req.query('done') ?? ''] }));

/** Runs a pause or a resume; a refusal re-renders the page with the form as it was sent. */
async function flowAction(c: Context<DashboardEnv>, done: string, act: (form: FormBody) => Promise<unknown>) {
  const form = await c.req.parseBody();
  try {
    await act(form);
  } catch (error) {
    const known = await refusal(c, error);
    const { scrub } = await invocationOf(c);
    const shown = Object.fromEntries(['kind', 'name', 'reason'].map((k) => [k, typeof form[k] === 'string' ? scrub(form[k] as string).slice(0, 1000) : '']));
    return renderFlow(c, { error: known.message, shown }, known.status);
  }
  return c.redirect(`/dashboard/flow?done=${done}`, 303);
}

const KINDS = ['type', 'pool'] as const;

operatorRoutes.post('/dashboard/flow/pause', requireAction(), (c) =>
  flowAction(c, 'paused', async (form) => {
    const kind = choiceField(form, 'kind', KINDS, { required: true })!;
    const name = textField(form, 'name', { max: 200, required: true })!;
    const reason = textField(form, 'reason', { max: 1000, required: true })!;
    await pauseClaims((await invocationOf(c)).sql, { kind, name, pausedBy: 'dashboard', reason });
  }),
);

operatorRoutes.post('/dashboard/flow/resume', requireAction(), (c) =>
  flowAction(c, 'resumed', async (form) => {
    const kind = choiceField(form, 'kind', KINDS, { required: true })!;
    const name = textField(form, 'name', { max: 200, required: true })!;
    await resumeClaims((await invocationOf(c)).sql, kind, name);
  }),
);

// ---- dead letters ----

operatorRoutes.get('/dashboard/dead-letters', requireSession(), async (c) => {
  const { sql, page } = await basics(c);
  const asked = c.req.query('type');
  const type = asked && page.types.includes(asked) ? asked : undefined;
  const groups = await deadLetters(sql, { type, limit: 100 });
  return c.html(<DeadLettersPage {...page} groups={groups} type={type} />);
});

// ---- bulk retry / cancel ----

async function renderBulk(c: Context<DashboardEnv>, page: Pick<BulkPageData, 'shown' | 'error' | 'preview' | 'outcome'>, status: 200 | 400 | 404 | 409 = 200) {
  return c.html(<BulkPage {...(await basics(c)).page} {...page} />, status);
}

operatorRoutes.get('/dashboard/bulk', requireSession(), (c) => renderBulk(c, { shown: prefillFromQuery(c.req.query()) }));

/** The request a post carries; a cancel reason holding one of the Worker's secrets is refused (the confirm form would carry it). */
async function bulkRequestOf(c: Context<DashboardEnv>, form: FormBody): Promise<BulkRequest> {
  const request = readBulkForm(form);
  const inv = await invocationOf(c);
  if (request.reason && inv.scrub(request.reason) !== request.reason) throw new HttpError(400, 'invalid_input', 'reason holds a secret value', 'reason');
  return request;
}

/** Runs a bulk step; a refusal re-renders the form as it was sent, with the reason. */
async function bulkStep(c: Context<DashboardEnv>, act: (form: FormBody) => Promise<Response>) {
  const form = await c.req.parseBody();
  try {
    return await act(form);
  } catch (error) {
    const known = await refusal(c, error);
    const { scrub } = await invocationOf(c);
    const shown = Object.fromEntries(Object.entries(form).filter(([k, v]) => k !== '_csrf' && typeof v === 'string').map(([k, v]) => [k, scrub(v as string).slice(0, 64)]));
    return renderBulk(c, { shown, error: known.message }, known.status);
  }
}

/** The dry run: the count and a sample of what a confirm would change; nothing is written. */
operatorRoutes.post('/dashboard/bulk/preview', requireAction(), (c) =>
  bulkStep(c, async (form) => {
    const request = await bulkRequestOf(c, form);
    const sql = (await invocationOf(c)).sql;
    const count = request.op === 'retry' ? bulkRequeue(sql, request.filter, { dryRun: true }) : bulkCancel(sql, request.filter, { dryRun: true });
    const [counted, sample] = await Promise.all([count, bulkSample(sql, request.op, request.filter, { limit: SAMPLE_SIZE })]);
    const seal = await sealFor(c.env, sessionOf(c), sealText(request));
    return renderBulk(c, { shown: bulkFields(request), preview: { request, matched: counted.matched, sample, seal } });
  }),
);

/**
 * The confirm: applies the request the dry run showed, and only that (its seal must match the
 * fields). Answered with the counts on the page, not a redirect: the page carries the form that
 * goes on when the set is larger than one request walks.
 */
operatorRoutes.post('/dashboard/bulk/apply', requireAction(), (c) =>
  bulkStep(c, async (form) => {
    const request = await bulkRequestOf(c, form);
    if (!(await sealMatches(c.env, sessionOf(c), sealText(request), form._seal))) {
      throw new HttpError(409, 'conflict', 'This is not the filter the dry run showed: run the dry run again and confirm what it counts.');
    }
    const cursor = textField(form, 'cursor', { max: 36 });
    if (cursor !== undefined && !CURSOR.test(cursor)) throw new HttpError(400, 'invalid_input', 'cursor: is not a job id', 'cursor');
    const sql = (await invocationOf(c)).sql;
    const walk = { maxJobs: BULK_MAX_JOBS, cursor: cursor ?? null };
    const counts = request.op === 'retry'
      ? await bulkRequeue(sql, request.filter, walk)
      : await bulkCancel(sql, request.filter, { ...walk, reason: request.reason ?? 'cancelled in bulk from the dashboard' });
    c.set('kick', 'requeued' in counts ? counts.requeued > 0 : counts.cancelRequested > 0);
    const seal = form._seal as string;
    return renderBulk(c, { shown: bulkFields(request), outcome: { request, counts, seal } });
  }),
);
