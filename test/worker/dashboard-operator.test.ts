import { beforeAll, describe, expect, it } from 'vitest';
import { claimJobs, spawn, spawnChildren } from '../../queue/index.ts';
import { dashboardBrowser } from './dashboard-browser.ts';
import { createWorkerHarness, type WorkerHarness } from './support.ts';

/**
 * The dashboard's operator actions for workflows and flow control, through the Worker in
 * workerd: a job's signal, children and replay; pausing and resuming; the dead letters; bulk
 * retry and cancel with a dry run first. Each action is checked against the database: what it
 * does, and that a refused one (no CSRF token, another origin, bad input, the engine's refusal)
 * writes nothing.
 */
const CANARY = 'canary-operator-token-5d2e91';

let h: WorkerHarness;
const browser = dashboardBrowser(() => h);
const { page, post } = browser;
beforeAll(async () => {
  h = await createWorkerHarness({ CANARY_API_TOKEN: CANARY, KICK_BUDGET_MS: '3000' } as never);
  await browser.signIn();
});

/** Everything an action could write: rows counted, and every job's state. */
async function snapshot() {
  const [row] = await h.sql`
    select (select count(*)::int from worker.jobs) as jobs, (select count(*)::int from worker.job_history) as events,
           (select count(*)::int from worker.signal_events) as signals, (select count(*)::int from worker.pauses) as pauses,
           (select md5(string_agg(id::text || status || step || coalesce(cancel_requested_at::text, ''), ',' order by id)) from worker.jobs) as states`;
  return row;
}

/** An action refused three ways (a forged CSRF token, another origin, no session) with its form otherwise valid: 403/401, nothing written. */
async function expectRefusedWithoutCsrf(path: string, form: Record<string, string>) {
  const before = await snapshot();
  expect((await post(path, { ...form, _csrf: 'A'.repeat(43) })).status, `${path} forged`).toBe(403);
  expect((await post(path, form, { origin: 'https://evil.example' })).status, `${path} origin`).toBe(403);
  expect((await post(path, form, { cookie: null })).status, `${path} session`).toBe(401);
  expect(await snapshot(), path).toEqual(before);
}

async function queuedJob(type: string, payload: Record<string, unknown>): Promise<string> {
  const [row] = await h.sql`select id from worker.enqueue_job(type => ${type}, payload => ${h.sql.json(payload as never)}, run_at => now() + interval '1 hour')`;
  return row!.id as string;
}

async function failedJob(type: string, payload: Record<string, unknown>, error: string): Promise<string> {
  const id = await queuedJob(type, payload);
  await h.sql`select worker.fail_job(${id}::uuid, ${error})`;
  return id;
}

/** An await_signal job run to its wait by the enqueue's kick. */
async function waitingJob(payload: Record<string, unknown>): Promise<string> {
  const res = await h.request('/v1/jobs', { method: 'POST', json: { type: 'await_signal', payload } });
  const { job } = (await res.json()) as { job: { id: string } };
  for (let i = 0; i < 100; i++) {
    if ((await h.sql`select 1 from worker.job_waits where job_id = ${job.id}`).length) return job.id;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`job ${job.id} never waited`);
}

async function statusOf(id: string, want?: string): Promise<string> {
  let status = '';
  for (let i = 0; i < 100; i++) {
    status = (await h.sql`select status from worker.jobs where id = ${id}`)[0]!.status as string;
    if (!want || status === want) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  return status;
}

/** The hidden fields of the form with this id, as a browser would post them. */
function formFields(html: string, id: string): Record<string, string> {
  const form = new RegExp(`<form[^>]*id="${id}"[^>]*>(.*?)</form>`, 's').exec(html)?.[1];
  if (!form) throw new Error(`no form ${id}`);
  const unescape = (v: string) => v.replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');
  return Object.fromEntries([...form.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)"\/>/g)].map((m) => [m[1]!, unescape(m[2]!)]));
}

describe('a job waiting for a signal', () => {
  it('shows its wait, and the signal form sends the event: the job resumes with its payload', async () => {
    const name = `approve-${crypto.randomUUID().slice(0, 6)}`;
    const id = await waitingJob({ name, key: 'order-7', timeoutMs: 86_400_000 });
    const view = await page(`/dashboard/jobs/${id}`);
    expect(view.text).toContain('<h2>Waiting for an event</h2>');
    expect(view.text).toMatch(new RegExp(`<dt>event</dt><dd class="mono">${name}</dd><dt>key</dt><dd class="mono">order-7</dd><dt>resumes at step</dt><dd>resumed</dd>`));
    expect(view.text).toMatch(/<dd id="wait-timeout">\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ<\/dd>/);
    expect(view.text).toContain(`<input name="name" value="${name}"`);
    expect(view.text).toContain('<input name="key" value="order-7"');
    expect(view.text).not.toContain('http-equiv="refresh"'); // a parked job's page keeps a half-typed signal

    await expectRefusedWithoutCsrf(`/dashboard/jobs/${id}/signal`, { name, key: 'order-7', payload: '{"ok": true}' });
    const before = await snapshot();
    const broken = await post(`/dashboard/jobs/${id}/signal`, { name, key: 'order-7', payload: `{"ok": tru ${CANARY}` });
    expect(broken.status).toBe(400);
    expect(broken.text).toContain('payload: is not valid JSON');
    expect(broken.text).not.toContain(CANARY);
    expect((await post(`/dashboard/jobs/${id}/signal`, { name: '  ', payload: '' })).text).toContain('name: is required');
    expect(await snapshot()).toEqual(before);

    const sent = await post(`/dashboard/jobs/${id}/signal`, { name, key: 'order-7', payload: '{"approvedBy": "ops"}' });
    expect(sent.status).toBe(303);
    expect(sent.headers.get('location')).toBe(`/dashboard/jobs/${id}?done=signal-delivered`);
    expect(await statusOf(id, 'done')).toBe('done');
    const [row] = await h.sql`select result from worker.jobs where id = ${id}`;
    expect(row!.result).toMatchObject({ event: { outcome: 'signalled', name, key: 'order-7', payload: { approvedBy: 'ops' } } });
  });

  it('a job not waiting keeps the event for its next wait; an ended job is the engine\'s 409, nothing written', async () => {
    const queued = await queuedJob('uppercase', { text: 'not waiting' });
    const view = await page(`/dashboard/jobs/${queued}`);
    expect(view.text).toContain('<h2>Signal</h2>');
    expect(view.text).toContain('Not waiting for an event now');
    const kept = await post(`/dashboard/jobs/${queued}/signal`, { name: 'later', payload: '' });
    expect(kept.headers.get('location')).toBe(`/dashboard/jobs/${queued}?done=signal-kept`);
    expect(await h.sql`select name, key, payload from worker.signal_events where job_id = ${queued}`).toEqual([{ name: 'later', key: '', payload: null }]);
    expect((await page(kept.headers.get('location')!)).text).toContain('the event is kept for its next wait on it');

    const ended = await failedJob('uppercase', { text: 'over' }, 'gave up');
    expect((await page(`/dashboard/jobs/${ended}`)).text).not.toContain('id="signal-form"');
    const before = await snapshot();
    const refused = await post(`/dashboard/jobs/${ended}/signal`, { name: 'later' });
    expect(refused.status).toBe(409);
    expect(refused.text).toMatch(/<div class="error" role="alert">[^<]*failed[^<]*<\/div>/);
    expect(await snapshot()).toEqual(before);
  });
});

describe('a parent and its children', () => {
  it("shows the parent's join and each child's outcome, and each child links to its parent", async () => {
    const parent = await queuedJob('countdown', { n: 1 });
    await h.sql`update worker.jobs set run_at = now() where id = ${parent}`;
    const [claimed] = await claimJobs(h.sql, { workerId: 'dash-test', limit: 1, types: ['countdown'] });
    expect(claimed!.id).toBe(parent);
    await spawnChildren(h.sql, claimed!, spawn([
      { type: 'uppercase', payload: { text: 'a' }, delayMs: 3_600_000 },
      { type: 'uppercase', payload: { text: 'b' }, delayMs: 3_600_000 },
      { type: 'uppercase', payload: { text: 'c' }, delayMs: 3_600_000 },
    ], { next: 'joined', join: 2 }));
    const children = (await h.sql`select id from worker.jobs where parent_id = ${parent} order by id`).map((r) => r.id as string);
    await h.sql`select worker.fail_job(${children[0]!}::uuid, ${`gave up ${CANARY}`})`;

    const view = await page(`/dashboard/jobs/${parent}`);
    expect(view.text).toContain('<p id="join" data-join="count" data-need="2" data-ended="1" data-total="3">Waits for 2 of 3 children (1 ended), then resumes at step joined.</p>');
    const rows = [...view.text.matchAll(/<tr data-child="([0-9a-f-]{36})" class="row-([a-z_]+)">.*?<\/tr>/g)];
    expect(rows.map((m) => [m[1], m[2]])).toEqual([[children[0], 'failed'], [children[1], 'queued'], [children[2], 'queued']]);
    expect(rows[0]![0]).toContain('gave up [redacted]');
    expect(view.text).not.toContain(CANARY);

    const child = await page(`/dashboard/jobs/${children[1]}`);
    expect(child.text).toContain(`<p id="parent">Child of <a href="/dashboard/jobs/${parent}"`);
  });
});

describe('replay', () => {
  it('replays an ended job from a step it reached, with an edited payload, and links the two pages', async () => {
    const res = await h.request('/v1/jobs', { method: 'POST', json: { type: 'countdown', payload: { n: 2 } } });
    const old = ((await res.json()) as { job: { id: string } }).job.id;
    expect(await statusOf(old, 'done')).toBe('done');
    const view = await page(`/dashboard/jobs/${old}`);
    expect(view.text).toContain('<select name="fromStep"><option value="count">count</option><option value="start" selected="">start</option></select>');

    const fields = { fromStep: 'count', payload: '{"n": 3}' };
    await expectRefusedWithoutCsrf(`/dashboard/jobs/${old}/replay`, fields);
    const before = await snapshot();
    for (const [payload, message] of [['{"n": 3', 'payload: is not valid JSON'], ['[3]', 'payload: must be a JSON object'], ['{"n": "three"}', 'payload.n ']] as const) {
      const bad = await post(`/dashboard/jobs/${old}/replay`, { fromStep: 'count', payload });
      expect(bad.status, payload).toBe(400);
      expect(bad.text, payload).toContain(message);
    }
    const neverReached = await post(`/dashboard/jobs/${old}/replay`, { fromStep: 'finish' });
    expect(neverReached.status).toBe(400);
    expect(neverReached.text).toContain('never reached step &quot;finish&quot;');
    expect(await snapshot()).toEqual(before);

    const replayed = await post(`/dashboard/jobs/${old}/replay`, fields);
    expect(replayed.status).toBe(303);
    const fresh = /^\/dashboard\/jobs\/([0-9a-f-]{36})\?done=replay$/.exec(replayed.headers.get('location')!)![1]!;
    expect(fresh).not.toBe(old);
    const [row] = await h.sql`select payload, status from worker.jobs where id = ${fresh}`;
    expect(row!.payload).toEqual({ n: 3 });
    expect(await statusOf(fresh, 'done')).toBe('done');
    const freshView = await page(`/dashboard/jobs/${fresh}?done=replay`);
    expect(freshView.text).toMatch(new RegExp(`<li data-kind="replay_of">A replay of <a href="/dashboard/jobs/${old}"[^>]*>…[0-9a-f]{8}</a> from step count, payload edited`));
    expect((await page(`/dashboard/jobs/${old}`)).text).toMatch(new RegExp(`<li data-kind="replayed_by">Replayed as <a href="/dashboard/jobs/${fresh}"`));
    expect(await h.sql`select payload from worker.jobs where id = ${old}`).toEqual([{ payload: { n: 2 } }]); // the old job as it was
  });

  it("offers no replay for a job that has not ended, and the engine refuses one: 409, nothing created", async () => {
    const queued = await queuedJob('uppercase', { text: 'still queued' });
    expect((await page(`/dashboard/jobs/${queued}`)).text).not.toContain('id="replay-form"');
    const before = await snapshot();
    const refused = await post(`/dashboard/jobs/${queued}/replay`, { fromStep: 'start' });
    expect(refused.status).toBe(409);
    expect(refused.text).toContain('queued');
    expect(await snapshot()).toEqual(before);
  });
});

