import { beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { dashboard } from '../../functions/dashboard/index.tsx';
import { archiveKey } from '../../functions/platform/build/adapters/r2-log-archive.ts';
import { createSession, readSession, SESSION_TTL_MS } from '../../functions/dashboard/session.ts';
import { checkSchedules, enqueueSlot, histogramQuantile, rollupJobEvents, scheduleReports, syncSchedules, type Schedule } from '../../queue/index.ts';
import { dashboardBrowser } from './dashboard-browser.ts';
import { countJobs, createWorkerHarness, TOKENS, type WorkerHarness } from './support.ts';

const CANARY = 'canary-digitalocean-token-e41a';
const TICK = '* * * * *';

let h: WorkerHarness;
beforeAll(async () => {
  h = await createWorkerHarness({ CANARY_API_TOKEN: CANARY } as never);
});

const browser = dashboardBrowser(() => h);
const { page, post, login } = browser;

async function enqueueQueued(type: string, payload: Record<string, unknown> = {}): Promise<string> {
  const [row] = await h.sql`select id from worker.enqueue_job(type => ${type}, payload => ${h.sql.json(payload as never)}, run_at => now() + interval '1 hour')`;
  return row!.id as string;
}

const statusOf = async (id: string) => (await h.sql`select status from worker.jobs where id = ${id}`)[0]!.status as string;

describe('logging in', () => {
  it('sends a visitor without a session to the login form, and back after', async () => {
    const res = await page('/?status=failed', { cookie: null });
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe('/dashboard/login?next=%2F%3Fstatus%3Dfailed');
    const form = await page('/dashboard/login?next=%2F%3Fstatus%3Dfailed', { cookie: null });
    expect(form.status).toBe(200);
    expect(form.text).toContain('<form class="login" method="post" action="/dashboard/login">');
    expect(form.text).toContain('name="next" value="/?status=failed"');
    expect(form.headers.get('content-security-policy')).toContain("default-src 'none'");
    expect(form.headers.get('x-frame-options')).toBe('DENY');
  });

  it('refuses a wrong token, a token without the admin scope, and a post from another origin', async () => {
    for (const token of ['nope', TOKENS.enqueue, TOKENS.metrics]) {
      const res = await login(token);
      expect(res.status).toBe(401);
      expect(res.text).toContain('That is not the admin token.');
      expect(res.headers.get('set-cookie')).toBeNull();
    }
    const cross = await page('/dashboard/login', { method: 'POST', form: { token: TOKENS.admin }, cookie: null, origin: 'https://evil.example' });
    expect(cross.status).toBe(403);
    expect(cross.headers.get('set-cookie')).toBeNull();
    const noOrigin = await page('/dashboard/login', { method: 'POST', form: { token: TOKENS.admin }, cookie: null, origin: null });
    expect(noOrigin.status).toBe(403);
  });

  it('sets a signed, HttpOnly, Secure, SameSite=Strict cookie that is not the token, and never sends a visitor elsewhere', async () => {
    const res = await login();
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe('/');
    const setCookie = res.headers.get('set-cookie')!;
    expect(setCookie).toMatch(/^__Host-starbase_session=v2\.[A-Za-z0-9_-]{24}\.[A-Za-z0-9_-]{43}; Max-Age=43200; Path=\/; HttpOnly; Secure; SameSite=Strict$/);
    expect(setCookie).not.toContain(TOKENS.admin);
    browser.cookie = /^__Host-starbase_session=([^;]+)/.exec(setCookie)![1]!;
    const offsite = await page('/dashboard/login', { method: 'POST', form: { token: TOKENS.admin, next: '//evil.example/x' }, cookie: null });
    expect(offsite.headers.get('location')).toBe('/');
  });

  it('refuses a tampered or expired session, and every session once the session secret is rotated', async () => {
    const { cookie } = browser;
    const [body, mac] = [cookie.slice(0, cookie.lastIndexOf('.')), cookie.slice(cookie.lastIndexOf('.') + 1)];
    const other = body.replace(/.$/, (ch) => (ch === 'A' ? 'B' : 'A'));
    expect((await page('/', { cookie: `${other}.${mac}` })).status).toBe(303);
    expect((await page('/', { cookie: `${body}.${'A'.repeat(43)}` })).status).toBe(303);
    expect((await page('/')).status).toBe(200);

    // a session used every 20 minutes lives out its 12 h, and not a moment longer
    const store = { env: h.env, sql: h.sql, idleMs: 30 * 60_000 };
    const start = Date.parse('2026-03-01T00:00:00Z');
    const { cookie: fresh } = await createSession(store, new Date(start));
    for (let t = start; t < start + SESSION_TTL_MS; t += 20 * 60_000) expect(await readSession(store, fresh, new Date(t))).not.toBeNull();
    expect(await readSession(store, fresh, new Date(start + SESSION_TTL_MS - 1))).not.toBeNull();
    expect(await readSession(store, fresh, new Date(start + SESSION_TTL_MS))).toBeNull();
    expect(await readSession({ ...store, env: { ...h.env, SESSION_SECRET: 'rotated-session-secret-0123456789abcdef' } }, cookie)).toBeNull();
    expect(await readSession({ ...store, env: { ...h.env, SESSION_SECRET: undefined } }, cookie)).toBeNull();
  });
});

describe('the overview', () => {
  it('shows counters by status, queue depth over time, running jobs, recent jobs with filters, the lease and open alerts', async () => {
    const queued = await enqueueQueued('uppercase', { text: 'waiting' });
    await h.request('/v1/jobs', { method: 'POST', json: { type: 'fail', payload: {}, maxAttempts: 1 } });
    const running = await enqueueQueued('countdown', { n: 1 });
    await h.sql`update worker.jobs set status = 'running', attempts = 1, started_at = now() - interval '3 hours', claimed_at = now() - interval '3 hours',
                  locked_until = now() + interval '1 hour', locked_by = 'host-7:abc', lease_token = gen_random_uuid() where id = ${running}`;
    await h.trigger(TICK, new Date());

    const res = await page('/');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    expect(res.text).toContain('<meta http-equiv="refresh" content="10"/>');
    const counter = (s: string) => new RegExp(`data-counter="${s}"[^>]*><div class="label">${s}</div><div class="n">(\\d+)</div>`).exec(res.text)?.[1];
    expect(counter('queued')).toBe('1');
    expect(counter('running')).toBe('1');
    expect(Number(counter('failed'))).toBeGreaterThanOrEqual(1);
    expect(res.text).toMatch(/<svg viewBox="0 0 720 180" role="img" aria-label="queue depth: \d+ queued, \d+ due, 1 running">/);
    expect(res.text).toContain('host-7:abc');
    expect(res.text).toContain('3h00m (stuck)');
    expect(res.text).toMatch(new RegExp(`<tr class="row-queued" data-job="${queued}">.*?<span class="status status-queued" data-status="queued">queued</span>`));
    expect(res.text).toMatch(/leader default · generation \d+/);
    expect(res.text).toContain('data-alert="stuck_job"');
    expect(res.text).toContain('data-alert="poison_job"');
    expect(res.text).toMatch(/<input type="hidden" name="_csrf" value="[A-Za-z0-9_-]{43}"\/>/);
    browser.csrf = /name="_csrf" value="([A-Za-z0-9_-]{43})"/.exec(res.text)![1]!;

    const failedOnly = await page('/?status=failed&type=fail');
    expect(failedOnly.text).not.toContain(`data-job="${queued}"`);
    expect(failedOnly.text).toMatch(/<tr class="row-failed" data-job=/);
    expect(failedOnly.text).toContain('<option value="failed" selected="">failed</option>');
    expect((await page('/?status=bogus&type=DROP%20TABLE')).status).toBe(200); // unknown filters are ignored
  });
});

describe('job ids on the dashboard', () => {
  it('abbreviates each id by its random tail, so 25 jobs made at once read differently', async () => {
    // one statement: every id starts with the same milliseconds (UUIDv7), so a prefix would repeat
    const jobs = Array.from({ length: 25 }, (_, i) => ({ type: 'uppercase', payload: { text: `short-${i}` }, runAt: '2099-01-01T00:00:00Z', priority: 1 }));
    const ids = (await h.sql`select j->>'id' as id from worker.enqueue_jobs(${h.sql.json(jobs)}::jsonb) j`).map((r) => r.id as string);
    expect(new Set(ids.map((id) => id.slice(0, 8))).size).toBeLessThan(25);
    const res = await page('/?status=queued&type=uppercase');
    const shown = [...res.text.matchAll(/<tr class="row-queued" data-job="([0-9a-f-]{36})"><td class="mono"><a href="\/dashboard\/jobs\/\1" title="\1" data-short-id="([0-9a-f]{8})">…\2<\/a>/g)];
    const ours = shown.filter((m) => ids.includes(m[1]!));
    expect(ours).toHaveLength(25);
    for (const m of ours) expect(m[2]).toBe(m[1]!.replace(/-/g, '').slice(-8));
    expect(new Set(ours.map((m) => m[2])).size).toBe(25);
    const view = await page(`/dashboard/jobs/${ids[0]}`);
    expect(view.text).toContain(`<title>uppercase …${ids[0]!.slice(-8)}`);
    await h.sql`delete from worker.jobs where payload->>'text' like 'short-%'`;
  });
});

describe('the job page', () => {
  it('shows fields, the payload with secrets redacted, checkpoint, result, the last error scrubbed, and the events', async () => {
    const res = await h.request('/v1/jobs', { method: 'POST', json: { type: 'fail', payload: { message: `refused ${CANARY}`, apiToken: 'sk-payload-canary-1' }, maxAttempts: 1 } });
    const { job } = (await res.json()) as { job: { id: string } };
    const view = await page(`/dashboard/jobs/${job.id}`);
    expect(view.status).toBe(200);
    expect(view.text).toContain('<span class="status status-failed" data-status="failed">failed</span>');
    expect(view.text).toContain('&quot;apiToken&quot;: &quot;[redacted]&quot;');
    expect(view.text).not.toContain('sk-payload-canary-1');
    expect(view.text).not.toContain(CANARY);
    expect(view.text).toContain('<pre class="json" id="last-error">refused [redacted]</pre>');
    expect([...view.text.matchAll(/<li data-kind="([a-z_]+)">/g)].map((m) => m[1])).toEqual(['enqueued', 'claimed', 'failed']);
    expect(view.text).not.toMatch(/token&quot;:&quot;[0-9a-f-]{36}/); // the lease token is withheld
    expect(view.text).toContain(`action="/dashboard/jobs/${job.id}/retry"`);
    expect(view.text).not.toContain(`action="/dashboard/jobs/${job.id}/cancel"`);
    expect(view.text).not.toContain('refresh'); // a finished job's page stays put

    const done = (await (await h.request('/v1/jobs', { method: 'POST', json: { type: 'countdown', payload: { n: 1 } } })).json()) as { job: { id: string } };
    const doneView = await page(`/dashboard/jobs/${done.job.id}`);
    expect(doneView.text).toContain('&quot;taken&quot;: 1');
    expect(doneView.text).toContain('&quot;steps&quot;: 1');
  });

  it('links a build to its log, and answers an unknown job with a 404 page', async () => {
    const build = await enqueueQueued('build', { accountId: 'acct-1', serviceId: 'svc', branch: 'main', commitSha: 'abc' });
    expect((await page(`/dashboard/jobs/${build}`)).text).toContain(`<a href="/dashboard/builds/${build}/log" id="build-log">Build log</a>`);
    // the link works with the session alone (a browser sends no bearer token)
    expect((await page(`/dashboard/builds/${build}/log`)).text).toBe('');
    await h.env.BUILD_LOGS.put(archiveKey(build), 'step 1/2: FROM node:24\nstep 2/2: RUN npm ci\n');
    const log = await page(`/dashboard/builds/${build}/log`);
    expect(log.status).toBe(200);
    expect(log.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    expect(log.headers.get('x-build-status')).toBe('queued');
    expect(log.headers.get('x-build-in-progress')).toBe('false'); // never started
    expect(log.text).toBe('step 1/2: FROM node:24\nstep 2/2: RUN npm ci\n');
    // between two polls: queued again, but started
    await h.sql`update worker.jobs set started_at = now(), step = 'poll' where id = ${build}`;
    const between = await page(`/dashboard/builds/${build}/log`);
    expect([between.headers.get('x-build-status'), between.headers.get('x-build-in-progress')]).toEqual(['queued', 'true']);
    const anonymous = await page(`/dashboard/builds/${build}/log`, { cookie: null });
    expect(anonymous.status).toBe(303);
    expect(anonymous.text).not.toContain('FROM node');
    expect((await page(`/dashboard/builds/${await enqueueQueued('uppercase', { text: 'x' })}/log`)).status).toBe(404);
    const missing = await page('/dashboard/jobs/00000000-0000-4000-8000-000000000000');
    expect(missing.status).toBe(404);
    expect(missing.text).toContain('no job 00000000-0000-4000-8000-000000000000');
    expect((await page('/dashboard/jobs/not-a-uuid')).status).toBe(404);
  });
});

describe('deadlines on the dashboard', () => {
  it('lists the jobs past their deadline with how late and the severity, shows the deadline on the job page and the severity in the alert list', async () => {
    const [row] = await h.sql`select id from worker.enqueue_job(type => 'uppercase', payload => '{"text":"late"}', run_at => now() + interval '1 day',
                                                             deadline_ms => 60000, deadline_severity => 'critical')`;
    const late = row!.id as string;
    await h.sql`update worker.jobs set created_at = now() - interval '2 hours', deadline_at = now() - interval '2 hours' + interval '1 minute' where id = ${late}`;
    const onTime = await enqueueQueued('uppercase', { text: 'on time' });
    await h.trigger(TICK, new Date());

    const res = await page('/');
    const table = res.text.slice(res.text.indexOf('<section class="panel" id="past-deadline">'));
    expect(table).toMatch(/^<section class="panel" id="past-deadline"><h2>Past their deadline \(1\)<\/h2>/);
    expect(table).toMatch(new RegExp(`<tr class="row-failed" data-past-deadline="${late}">.*?<td data-late-by="">119m</td><td data-severity="critical">critical</td>`));
    expect(res.text).not.toContain(`data-past-deadline="${onTime}"`);
    expect(res.text).toMatch(/<tr data-alert="deadline_missed" class="row-failed"><td title="Job past its deadline">deadline_missed<\/td><td data-severity="critical">critical<\/td>/);
    expect(res.text).toContain('<tr data-alert="poison_job"><td title="Poison job">poison_job</td><td data-severity="warning">warning</td>');

    const view = await page(`/dashboard/jobs/${late}`);
    expect(view.text).toMatch(/<dd id="deadline" data-severity="critical">[^<]+ \(critical\) — past it by 119m<\/dd>/);
    expect((await page(`/dashboard/jobs/${onTime}`)).text).not.toContain('id="deadline"');
  });
});

describe('searching and paging the jobs', () => {
  const rowIds = (html: string) => [...html.matchAll(/<tr class="row-[a-z_]+" data-job="([0-9a-f-]{36})">/g)].map((m) => m[1]!);
  const olderHref = (html: string) => /<a href="([^"]+)" id="older" rel="next">/.exec(html)?.[1]?.replace(/&amp;/g, '&');

  it('pages past 25 by keyset cursor, newest first, with no job twice or missed, and from the overview on', async () => {
    const batch = `page-${Date.now()}`;
    const jobs = Array.from({ length: 30 }, (_, i) => ({ type: 'uppercase', payload: { text: `p${i}`, batch }, runAt: '2099-01-01T00:00:00Z' }));
    const made = (await (await h.request('/v1/jobs/batch', { method: 'POST', json: { jobs } })).json()) as { jobs: { id: string }[] };
    const newestFirst = made.jobs.map((j) => j.id).reverse();

    const first = await page(`/dashboard/jobs?q=${encodeURIComponent(`batch=${batch}`)}`);
    expect(first.status).toBe(200);
    expect(rowIds(first.text)).toEqual(newestFirst.slice(0, 25));
    expect(first.text).toContain('(a scan: no index serves a payload field)');
    const next = olderHref(first.text)!;
    expect(next).toMatch(/^\/dashboard\/jobs\?q=batch%3Dpage-\d+&cursor=[A-Za-z0-9_-]+$/);
    const second = await page(next);
    expect(rowIds(second.text)).toEqual(newestFirst.slice(25));
    expect(olderHref(second.text)).toBeUndefined();
    expect(second.text).toContain('id="newest">« newest</a>');

    // the overview's 25 recent jobs lead on to the jobs page's next 25, filters kept
    const overview = await page('/?type=uppercase');
    const more = olderHref(overview.text)!;
    expect(more).toMatch(/^\/dashboard\/jobs\?type=uppercase&cursor=/);
    const onward = rowIds((await page(more)).text);
    expect(onward.length).toBeGreaterThan(0);
    expect(onward.filter((id) => rowIds(overview.text).includes(id))).toEqual([]);
  });

  it('finds a job by id (its page), by submit or dedupe key, and by a nested payload field', async () => {
    const submitKey = `sk-find-${Date.now()}`;
    const dedupeKey = `dk-find-${Date.now()}`;
    const bySubmit = (await (await h.request('/v1/jobs', { method: 'POST', json: { type: 'uppercase', payload: { text: 'a' }, submitKey, runAt: '2099-01-01T00:00:00Z' } })).json()) as { job: { id: string } };
    const byDedupe = (await (await h.request('/v1/jobs', { method: 'POST', json: { type: 'uppercase', payload: { text: 'b', spec: { region: 'ams3' } }, dedupeKey, runAt: '2099-01-01T00:00:00Z' } })).json()) as { job: { id: string } };

    const byId = await page(`/dashboard/jobs?q=${bySubmit.job.id.toUpperCase()}`);
    expect(byId.status).toBe(303);
    expect(byId.headers.get('location')).toBe(`/dashboard/jobs/${bySubmit.job.id}`);
    const noSuchId = await page('/dashboard/jobs?q=00000000-0000-7000-8000-000000000000');
    expect(noSuchId.status).toBe(200);
    expect(noSuchId.text).toContain('No job has this id.');

    expect(rowIds((await page(`/dashboard/jobs?q=${submitKey}`)).text)).toEqual([bySubmit.job.id]);
    expect(rowIds((await page(`/dashboard/jobs?q=key:${dedupeKey}`)).text)).toEqual([byDedupe.job.id]);
    expect(rowIds((await page(`/dashboard/jobs?q=${encodeURIComponent('spec.region=ams3')}&status=queued&type=uppercase`)).text)).toEqual([byDedupe.job.id]);
    expect(rowIds((await page(`/dashboard/jobs?q=${encodeURIComponent('spec.region=ams3')}&status=done`)).text)).toEqual([]);
  });

  it('treats injection attempts as plain values: nothing matches, nothing runs, nothing renders as markup', async () => {
    const before = await countJobs(h.sql);
    for (const q of [`' or 1=1 --`, `text=x' or '1'='1`, `text=a'); drop table worker.jobs; --`, `key:%' or submit_key like '%`, `text->>0=1`, `"><script>alert(1)</script>`]) {
      const res = await page(`/dashboard/jobs?q=${encodeURIComponent(q)}`);
      expect(res.status, q).toBe(200);
      expect(rowIds(res.text), q).toEqual([]);
      expect(res.text, q).not.toContain('<script>');
    }
    expect(await countJobs(h.sql)).toBe(before);
    const [table] = await h.sql`select to_regclass('worker.jobs') as t`;
    expect(table!.t).toBe('worker.jobs');
    // filters outside their sets are dropped, not passed on
    expect((await page(`/dashboard/jobs?status=${encodeURIComponent("queued' or 1=1")}&type=${encodeURIComponent('x; drop')}`)).status).toBe(200);
  });

  it('refuses a tampered cursor, an overlong search, and a search for a secret value, naming the field', async () => {
    const notOurs = [
      'AAAA',
      Buffer.from(JSON.stringify(["' or 1=1 --"])).toString('base64url'),
      Buffer.from(JSON.stringify(['01a00000-0000-7000-8000-000000000000', 'extra'])).toString('base64url'),
      Buffer.from('{"id":"x"}').toString('base64url'),
      '%00',
    ];
    for (const cursor of notOurs) {
      const res = await page(`/dashboard/jobs?cursor=${encodeURIComponent(cursor)}`);
      expect(res.status, cursor).toBe(400);
      expect(res.text).toContain('cursor is not a cursor this dashboard made');
    }
    expect((await page(`/dashboard/jobs?q=${'x'.repeat(201)}`)).text).toContain('q is longer than 200 characters');
    const secret = await page(`/dashboard/jobs?q=${encodeURIComponent(`message=refused ${CANARY}`)}`);
    expect(secret.status).toBe(400);
    expect(secret.text).toContain('q holds a secret value');
    expect(secret.text).not.toContain(CANARY);
  });

  it('shows each job\'s last error in the lists, scrubbed and cut to a line', async () => {
    const message = `refused ${CANARY} ${'x'.repeat(300)}`;
    const res = await h.request('/v1/jobs', { method: 'POST', json: { type: 'fail', payload: { message }, maxAttempts: 1 } });
    const { job } = (await res.json()) as { job: { id: string } };
    for (const path of ['/dashboard/jobs?status=failed&type=fail', '/?status=failed&type=fail']) {
      const list = await page(path);
      const row = new RegExp(`<tr class="row-failed" data-job="${job.id}">.*?</tr>`).exec(list.text)![0];
      expect(row).toMatch(/<span class="last-error" title="refused \[redacted\] x{300}" data-last-error="">refused \[redacted\] x{101}…<\/span>/);
      expect(list.text).not.toContain(CANARY);
    }
  });
});

describe('the schedules page', () => {
  it('shows each schedule\'s next slot, last success and missed slots, by the dead-man check\'s rule', async () => {
    const at = new Date('2026-03-01T01:05:00Z');
    const hourly: Schedule = { name: 'dash_every_10', cron: '*/10 * * * *', type: 'uppercase', slotKey: (s) => `dash10:${s.toISOString()}`, payload: () => ({ text: 'slot' }) };
    await syncSchedules(h.sql, [hourly]);
    await h.sql`update worker.schedules set created_at = '2026-03-01T00:00:00Z' where name = ${hourly.name}`;
    const ok = await enqueueSlot(h.sql, hourly, new Date('2026-03-01T00:20:00Z'));
    const failed = await enqueueSlot(h.sql, hourly, new Date('2026-03-01T00:30:00Z'));
    await h.sql`update worker.jobs set status = 'done', finished_at = '2026-03-01T00:21:00Z' where id = ${ok.jobId}`;
    await h.sql`update worker.jobs set status = 'failed', finished_at = '2026-03-01T00:31:00Z' where id = ${failed.jobId}`;
    await checkSchedules(h.sql, at, 10 * 60_000, [hourly]); // records the last success

    const [report] = await scheduleReports(h.sql, [hourly], { now: at, graceMs: 10 * 60_000 }).then((r) => r.filter((s) => s.name === hourly.name));
    expect(report!.nextSlotAt).toEqual(new Date('2026-03-01T01:10:00Z'));
    expect(report!.lastSuccessSlotAt).toEqual(new Date('2026-03-01T00:20:00Z'));
    // due by 00:55 and after the 00:20 success: 00:30 (its job failed), 00:40 and 00:50 (never enqueued)
    expect(report!.missedSlots).toEqual(['00:50', '00:40', '00:30'].map((t) => new Date(`2026-03-01T${t}:00Z`)));
    expect(report!.missed).toBe(3);
    expect(report!.recent.map((r) => [r.slotAt.toISOString(), r.status])).toEqual([['2026-03-01T00:30:00.000Z', 'failed'], ['2026-03-01T00:20:00.000Z', 'done']]);
    expect(report!.defined).toBe(true);

    // the page: the Worker's schedules, with real times; one recorded but no longer defined
    const res = await page('/dashboard/schedules');
    expect(res.status).toBe(200);
    const row = (name: string) => new RegExp(`<tr data-schedule="${name}"[^>]*>.*?</tr>`).exec(res.text)?.[0] ?? '';
    expect(row('cleanup')).toMatch(/data-next-slot="\d{4}-\d\d-\d\dT\d\d:(00|15|30|45):00\.000Z"/);
    expect(row('billing_cron')).toMatch(/data-next-slot="\d{4}-\d\d-01T00:00:00\.000Z"/);
    expect(row(hourly.name)).toContain('(no longer defined)');
    expect(row(hourly.name)).toContain(`<a href="/dashboard/jobs/${failed.jobId}"`);
    // a cleanup schedule that has not succeeded for 3 hours has missed its slots past the grace (1 h)
    await h.sql`update worker.schedules set created_at = now() - interval '3 hours', last_success_slot_at = null where name = 'cleanup'`;
    const missing = (await page('/dashboard/schedules')).text;
    const cleanup = /<tr data-schedule="cleanup" class="row-failed">.*?<\/tr>/.exec(missing)?.[0] ?? '';
    expect(Number(/data-missed="(\d+)"/.exec(cleanup)?.[1])).toBeGreaterThanOrEqual(7);
  });
});

describe('job types over time', () => {
  it('rolls steps up by the minute they ended, the same steps as the totals, and draws them per type', async () => {
    await h.request('/v1/jobs', { method: 'POST', json: { type: 'fail', payload: {}, maxAttempts: 1 } });
    await h.request('/v1/jobs', { method: 'POST', json: { type: 'countdown', payload: { n: 2 } } });
    await h.sql`insert into worker.step_minutes values (now() - interval '8 days', 'countdown', 'done', 0, 1, 0.001)`;
    await rollupJobEvents(h.sql, { now: new Date(Date.now() + 5 * 60_000) }); // past the roll-up's lag

    const totals = await h.sql`select type, outcome, bucket, steps::int, round(seconds::numeric, 6) as seconds from worker.step_stats order by 1, 2, 3`;
    const minutes = await h.sql`select type, outcome, bucket, sum(steps)::int as steps, round(sum(seconds)::numeric, 6) as seconds from worker.step_minutes group by 1, 2, 3 order by 1, 2, 3`;
    expect(minutes).toEqual(totals);
    expect(totals.length).toBeGreaterThan(0);
    const [old] = await h.sql`select count(*)::int as n from worker.step_minutes where minute < now() - interval '7 days'`;
    expect(old!.n).toBe(0); // pruned past 7 days

    const res = await page('/dashboard/history?window=1h');
    expect(res.status).toBe(200);
    for (const id of ['throughput', 'failure-rate', 'latency']) expect(res.text).toMatch(new RegExp(`<figure class="chart" id="${id}"><svg viewBox="0 0 720 180" role="img"`));
    const [fail] = await h.sql`select sum(steps)::int as steps, (sum(steps) filter (where outcome = 'failed'))::int as failed from worker.step_minutes where type = 'fail'`;
    expect(res.text).toMatch(new RegExp(`<tr data-type="fail"><td>fail</td><td data-steps="">${fail!.steps}</td><td data-done="">0</td><td data-failures="">${fail!.failed}</td><td data-failure-rate="">100%</td>`));
    expect(res.text).toContain('<span class="legend" data-line="countdown">');
    expect((await page('/dashboard/history?window=DROP')).text).toContain('<strong>last 6h</strong>'); // an unknown window is the default
  });

  it('reads a p95 from the duration histogram', () => {
    expect(histogramQuantile([0, 0, 0], [0.01, 0.05], 0.95)).toBe(0);
    expect(histogramQuantile([95, 5, 0], [0.01, 0.05], 0.95)).toBe(0.01);
    expect(histogramQuantile([94, 6, 0], [0.01, 0.05], 0.95)).toBe(0.05);
    expect(histogramQuantile([1, 0, 99], [0.01, 0.05], 0.95)).toBe(Infinity);
  });
});

describe("a build's log on its page", () => {
  it('shows the archived tail, scrubbed and escaped, live while the build runs', async () => {
    const build = await enqueueQueued('build', { accountId: 'acct-1', serviceId: 'svc', branch: 'main', commitSha: 'def' });
    expect((await page(`/dashboard/jobs/${build}`)).text).not.toContain('id="build-log-panel"'); // not started: no log yet
    await h.sql`update worker.jobs set started_at = now(), step = 'poll' where id = ${build}`;
    const lines = Array.from({ length: 250 }, (_, i) => `line ${i}`);
    await h.env.BUILD_LOGS.put(archiveKey(build), [...lines, `token ${CANARY}`, '<script>alert(1)</script>', ''].join('\n'));
    const view = await page(`/dashboard/jobs/${build}`);
    expect(view.text).toContain('<h2>Build log (live)</h2>');
    expect(view.text).toContain('<noscript><meta http-equiv="refresh" content="10"></noscript>'); // the live script reloads otherwise
    expect(view.text).toMatch(/<pre class="json log" id="build-log-tail" data-lines="200" data-last-seq="0">line 52\n/);
    expect(view.text).toContain('token [redacted]\n&lt;script&gt;alert(1)&lt;/script&gt;</pre>');
    expect(view.text).not.toContain(CANARY);
    expect(view.text).not.toContain('<script>');
    expect(view.text).toContain(`The last 200 of 252 lines; <a href="/dashboard/builds/${build}/log">the whole log</a>.`);
    expect(view.headers.get('content-security-policy')).toContain("default-src 'none'; script-src 'self';"); // only the live log's script (dashboard-live-log.test.ts)
  });
});

describe('actions', () => {
  it('refuse a post without a session, from another origin, or without the right CSRF token, changing nothing', async () => {
    const id = await enqueueQueued('uppercase', { text: 'keep me' });
    expect((await post(`/dashboard/jobs/${id}/cancel`, {}, { cookie: null })).status).toBe(401);
    expect((await post(`/dashboard/jobs/${id}/cancel`, {}, { origin: 'https://evil.example' })).status).toBe(403);
    expect((await post(`/dashboard/jobs/${id}/cancel`, {}, { origin: null })).status).toBe(403);
    const forged = await post(`/dashboard/jobs/${id}/cancel`, { _csrf: 'A'.repeat(43) });
    expect(forged.status).toBe(403);
    expect(forged.text).toContain('CSRF token mismatch');
    const { session } = await createSession({ env: h.env, sql: h.sql, idleMs: 30 * 60_000 });
    expect((await post(`/dashboard/jobs/${id}/cancel`, { _csrf: session.csrf })).status).toBe(403); // another session's token
    expect(await statusOf(id)).toBe('queued');
  });

  it('cancel, retry and fail a job, redirecting back to its page; a transition not allowed re-renders with the reason', async () => {
    const id = await enqueueQueued('uppercase', { text: 'act on me' });
    const cancelled = await post(`/dashboard/jobs/${id}/cancel`);
    expect(cancelled.status).toBe(303);
    expect(cancelled.headers.get('location')).toBe(`/dashboard/jobs/${id}?done=cancel`);
    expect(await statusOf(id)).toBe('cancelled');
    expect((await page(`/dashboard/jobs/${id}?done=cancel`)).text).toContain('<div class="notice" role="status">Cancelled.</div>');

    const again = await post(`/dashboard/jobs/${id}/cancel`);
    expect(again.status).toBe(409);
    expect(again.text).toContain(`cannot cancel job ${id}: it is cancelled`);

    expect((await post(`/dashboard/jobs/${id}/retry`)).status).toBe(303);
    expect(await statusOf(id)).toBe('done'); // requeued, and the kick ran it

    const other = await enqueueQueued('uppercase', { text: 'fail me' });
    expect((await post(`/dashboard/jobs/${other}/fail`, { reason: '  ' })).status).toBe(409);
    expect((await post(`/dashboard/jobs/${other}/fail`, { reason: 'bad input upstream' })).status).toBe(303);
    const [row] = await h.sql`select status, last_error from worker.jobs where id = ${other}`;
    expect(row).toEqual({ status: 'failed', last_error: 'bad input upstream' });
  });

  it('resolves an alert, and logs out', async () => {
    const [alert] = await h.sql`insert into worker.alerts (kind, key, message) values ('leader_churn', 'dash-test', 'churn') returning id`;
    const res = await post(`/dashboard/alerts/${alert!.id}/resolve`);
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe('/?done=resolved');
    const [row] = await h.sql`select resolved_at from worker.alerts where id = ${alert!.id}`;
    expect(row!.resolved_at).toBeInstanceOf(Date);

    const out = await post('/dashboard/logout');
    expect(out.status).toBe(303);
    expect(out.headers.get('set-cookie')).toMatch(/^__Host-starbase_session=; Max-Age=0; Path=\/; HttpOnly; Secure; SameSite=Strict/);
  });
});

describe('mounting', () => {
  it('shares no route with the API: GET / and /dashboard/* only', () => {
    const app = createApp();
    const ours = new Set(dashboard.routes.map((r) => `${r.method} ${r.path}`));
    for (const r of dashboard.routes) expect(r.path === '/' || r.path.startsWith('/dashboard/')).toBe(true);
    const pattern = (path: string) => new RegExp(`^${path.replace(/:[^/]+/g, '[^/]+').replace(/\*/g, '.*')}$`);
    const others = app.routes.filter((r) => r.method !== 'ALL' && !ours.has(`${r.method} ${r.path}`));
    expect(others.length).toBeGreaterThan(10);
    for (const r of others) {
      for (const d of dashboard.routes.filter((x) => x.method === r.method)) {
        expect(pattern(r.path).test(d.path.replace(/:[^/]+/g, 'x')), `${r.method} ${r.path} vs ${d.path}`).toBe(false);
        expect(pattern(d.path).test(r.path.replace(/:[^/]+/g, 'x')), `${d.method} ${d.path} vs ${r.path}`).toBe(false);
      }
    }
  });
});
