import { beforeAll, describe, expect, it } from 'vitest';
import { claimJobs, errorFingerprint, spawn, spawnChildren } from '../../queue/index.ts';
import { BULK_MAX_JOBS } from '../../functions/dashboard/operator-routes.tsx';
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
    const quoted = await post(`/dashboard/jobs/${old}/replay`, { fromStep: `finish ${CANARY}` });
    expect(quoted.text).toContain('never reached step &quot;finish [redacted]&quot;'); // the engine's message quotes the step: scrubbed
    expect(quoted.text).not.toContain(CANARY);
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

describe('flow control', () => {
  it('pauses a type from the form (by "dashboard", with the reason) and resumes it; claims skip it while paused', async () => {
    const empty = await page('/dashboard/flow');
    expect(empty.status).toBe(200);
    expect(empty.text).toContain('Nothing is paused');
    expect(empty.text).toContain('<a href="/dashboard/flow">Flow control</a>');
    const form = { kind: 'type', name: 'uppercase', reason: 'provider incident' };
    await expectRefusedWithoutCsrf('/dashboard/flow/pause', form);

    const paused = await post('/dashboard/flow/pause', form);
    expect(paused.status).toBe(303);
    expect(paused.headers.get('location')).toBe('/dashboard/flow?done=paused');
    expect(await h.sql`select kind, name, paused_by, reason from worker.pauses`).toEqual([{ kind: 'type', name: 'uppercase', paused_by: 'dashboard', reason: 'provider incident' }]);
    const id = await queuedJob('uppercase', { text: 'held' });
    await h.sql`update worker.jobs set run_at = now() where id = ${id}`;
    expect(await claimJobs(h.sql, { workerId: 'dash-test', limit: 10, types: ['uppercase'] })).toEqual([]);

    const listed = await page('/dashboard/flow?done=paused');
    expect(listed.text).toContain('Paused: claims skip it until it is resumed.');
    const row = /<tr data-pause="type:uppercase">.*?<\/tr>/.exec(listed.text)![0];
    expect(row).toMatch(/<td>type<\/td><td class="mono">uppercase<\/td><td>dashboard<\/td><td title="[^"]+">\d+s ago<\/td><td>provider incident<\/td>/);
    expect(formFields(row.replace('<form', '<form id="resume"'), 'resume')).toEqual({ _csrf: browser.csrf, kind: 'type', name: 'uppercase' });

    // the same pause from two tabs at once: one takes, the other is the engine's 409
    await h.sql`insert into worker.pool_capacity (pool, max_running_weight) values ('dash-pool', 0)`; // a pool is paused only once defined
    const twice = await Promise.all([post('/dashboard/flow/pause', { kind: 'pool', name: 'dash-pool', reason: 'a' }), post('/dashboard/flow/pause', { kind: 'pool', name: 'dash-pool', reason: 'b' })]);
    expect(twice.map((r) => r.status).sort()).toEqual([303, 409]);
    expect(await h.sql`select count(*)::int as n from worker.pauses where name = 'dash-pool'`).toEqual([{ n: 1 }]);
    await h.sql`delete from worker.pauses where name = 'dash-pool'`;
    await h.sql`delete from worker.pool_capacity where pool = 'dash-pool'`;

    await expectRefusedWithoutCsrf('/dashboard/flow/resume', { kind: 'type', name: 'uppercase' });
    const resumed = await post('/dashboard/flow/resume', { kind: 'type', name: 'uppercase' });
    expect(resumed.headers.get('location')).toBe('/dashboard/flow?done=resumed');
    expect(await h.sql`select * from worker.pauses`).toEqual([]);
    expect((await claimJobs(h.sql, { workerId: 'dash-test', limit: 10, types: ['uppercase'] })).map((j) => j.id)).toContain(id);
  });

  it('refuses bad input naming the field, and shows the engine\'s refusals, writing nothing', async () => {
    await h.sql`insert into worker.pauses (kind, name, paused_by, reason) values ('pool', 'gpu', 'ops', 'maintenance')`;
    const before = await snapshot();
    const cases: Array<[Record<string, string>, number, string]> = [
      [{ kind: 'cluster', name: 'x', reason: 'r' }, 400, 'kind: must be one of type, pool'],
      [{ kind: 'type', name: ' ', reason: 'r' }, 400, 'name: is required'],
      [{ kind: 'type', name: 'uppercase', reason: '' }, 400, 'reason: is required'],
      [{ kind: 'type', name: 'uppercase', reason: 'x'.repeat(1001) }, 400, 'reason: is longer than 1000 characters'],
      [{ kind: 'type', name: 'no_such_type', reason: 'r' }, 404, 'no_such_type'],
      [{ kind: 'pool', name: 'gpu', reason: 'again' }, 409, 'gpu'],
      [{ kind: 'pool', name: 'gpu', reason: `again ${CANARY}` }, 409, 'gpu'], // the form shown again: scrubbed
    ];
    for (const [form, status, message] of cases) {
      const res = await post('/dashboard/flow/pause', form);
      expect(res.status, JSON.stringify(form)).toBe(status);
      expect(res.text, JSON.stringify(form)).toMatch(new RegExp(`<div class="error" role="alert">[^<]*${message}`));
      expect(res.text).toContain('id="pause-form"'); // the page again, with the form
      expect(res.text).not.toContain(CANARY);
    }
    const notPaused = await post('/dashboard/flow/resume', { kind: 'type', name: 'countdown' });
    expect(notPaused.status).toBe(409);
    expect(await snapshot()).toEqual(before);
    await h.sql`delete from worker.pauses`;
  });

  it("shows each rate key's limit, its starts in the window and a provider's pause, scrubbed", async () => {
    await h.sql`insert into worker.rate_limits (key, max_starts, per_ms, starts, paused_until, pause_reason)
                values ('provider:dash-test', 5, 60000, array[now() - interval '10 seconds', now() - interval '5 minutes'],
                        now() + interval '90 seconds', ${`429 from provider ${CANARY}`})`;
    const res = await page('/dashboard/flow');
    const row = /<tr data-rate-key="provider:dash-test" class="row-failed">.*?<\/tr>/.exec(res.text)![0];
    expect(row).toContain('<td>5 per 1m</td><td data-started="">1 of 5</td>');
    expect(row).toMatch(/until \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ \(in \d+s\): 429 from provider \[redacted\]/);
    expect(res.text).not.toContain(CANARY);
    await h.sql`delete from worker.rate_limits where key = 'provider:dash-test'`;
  });
});

describe('dead letters and bulk retry', () => {
  let retryable: string[] = [];
  let other = '';
  let fingerprint = '';
  beforeAll(async () => {
    // two failures alike but for their numbers (one group), and one other (its own group)
    retryable = [await failedJob('uppercase', { text: 'a' }, `upstream 503 after 1200 ms ${CANARY}`), await failedJob('uppercase', { text: 'b' }, `upstream 503 after 950 ms ${CANARY}`)];
    other = await failedJob('uppercase', { text: 'c' }, 'payload rejected');
    fingerprint = await errorFingerprint(h.sql, `upstream 503 after 1200 ms ${CANARY}`);
  });

  it('groups failed jobs by type and error fingerprint, scrubbed, each group with its dry-run buttons', async () => {
    const res = await page('/dashboard/dead-letters?type=uppercase');
    expect(res.status).toBe(200);
    const row = new RegExp(`<tr data-group="uppercase:${fingerprint}">.*?</tr>`).exec(res.text)![0];
    expect(row).toContain('<td data-jobs="2">2</td>');
    expect(row).toContain('[redacted]');
    expect(res.text).not.toContain(CANARY);
    expect(row).toMatch(new RegExp(`<a href="/dashboard/jobs/${retryable[1]}"`)); // the latest job of the group
    expect(res.text).toContain('data-group="uppercase:');
    const buttons = [...row.matchAll(/<form class="inline" method="post" action="\/dashboard\/bulk\/preview">(.*?)<\/form>/g)].map((m) => formFields(`<form id="f">${m[1]}</form>`, 'f'));
    expect(buttons).toEqual([
      { _csrf: browser.csrf, op: 'retry', type: 'uppercase', fingerprint },
      { _csrf: browser.csrf, op: 'cancel', type: 'uppercase', fingerprint },
    ]);
  });

  it('a dry run counts and samples what the filter takes and writes nothing; the confirm applies that filter and no other', async () => {
    const before = await snapshot();
    const dry = await post('/dashboard/bulk/preview', { op: 'retry', type: 'uppercase', fingerprint });
    expect(dry.status).toBe(200);
    expect(dry.text).toContain('<section class="panel" id="bulk-preview" data-matched="2"><h2>Dry run: 2 jobs would be requeued</h2>');
    const sampled = [...dry.text.matchAll(/<tr class="row-failed" data-job="([0-9a-f-]{36})">/g)].map((m) => m[1]);
    expect(sampled).toEqual(retryable);
    expect(dry.text).not.toContain(CANARY);
    expect(await snapshot()).toEqual(before);

    const confirm = formFields(dry.text, 'bulk-confirm');
    expect(confirm).toMatchObject({ op: 'retry', type: 'uppercase', fingerprint, _seal: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/) });
    await expectRefusedWithoutCsrf('/dashboard/bulk/apply', confirm);
    // the confirm with its filter changed (widened to every failed uppercase job, or made a cancel) is refused
    const { fingerprint: _, ...widened } = confirm;
    for (const changed of [widened, { ...confirm, op: 'cancel' }, { ...confirm, type: 'countdown' }, { ...confirm, _seal: '' }]) {
      const res = await post('/dashboard/bulk/apply', changed);
      expect(res.status).toBe(409);
      expect(res.text).toContain('This is not the filter the dry run showed');
    }
    // another session's seal for the same filter is not this one's
    const stranger = dashboardBrowser(() => h);
    await stranger.signIn();
    expect((await stranger.post('/dashboard/bulk/apply', { ...confirm, _csrf: stranger.csrf })).status).toBe(409);
    expect(await snapshot()).toEqual(before);

    // the confirm posted twice at once (a double click): each job is requeued once, by one of them
    const both = await Promise.all([post('/dashboard/bulk/apply', confirm), post('/dashboard/bulk/apply', confirm)]);
    const requeued = both.map((r) => Number(/<tr data-count="requeued"><th>requeued<\/th><td>(\d+)<\/td><\/tr>/.exec(r.text)![1]));
    expect(both.map((r) => r.status)).toEqual([200, 200]);
    expect(requeued[0]! + requeued[1]!).toBe(2);
    expect(both.some((r) => r.text.includes('<tr data-count="matched"><th>matched</th><td>2</td></tr>'))).toBe(true);
    expect(both[0]!.text).not.toContain('id="bulk-continue"');
    const [events] = await h.sql`select count(*)::int as n from worker.job_history where job_id = any(${retryable}::uuid[]) and kind = 'requeued'`;
    expect(events!.n).toBe(2);
    for (const id of retryable) expect(await statusOf(id)).not.toBe('failed');
    expect(await statusOf(other)).toBe('failed');
  });

  it('cancels by type, status and time range, and shows the counts', async () => {
    const ids = [await queuedJob('uppercase', { text: 'x' }), await queuedJob('uppercase', { text: 'y' })];
    const outside = await queuedJob('uppercase', { text: 'z' });
    await h.sql`update worker.jobs set created_at = '2030-01-01T00:00:30Z' where id = any(${ids}::uuid[])`;
    await h.sql`update worker.jobs set created_at = '2030-01-01T00:01:00Z' where id = ${outside}`;
    const form = { op: 'cancel', type: 'uppercase', status: 'queued', createdAfter: '2030-01-01T00:00', createdBefore: '2030-01-01T00:01', reason: 'duplicate run' };
    const dry = await post('/dashboard/bulk/preview', form);
    expect(dry.text).toContain('Dry run: 2 jobs would be cancelled');
    const confirm = formFields(dry.text, 'bulk-confirm');
    expect(confirm).toMatchObject({ createdAfter: '2030-01-01T00:00:00.000Z', createdBefore: '2030-01-01T00:01:00.000Z', reason: 'duplicate run' });
    const applied = await post('/dashboard/bulk/apply', confirm);
    expect(applied.text).toContain('<tr data-count="cancelled"><th>cancelled</th><td>2</td></tr>');
    expect(await h.sql`select status, last_error from worker.jobs where id = any(${ids}::uuid[])`).toEqual([
      { status: 'cancelled', last_error: 'duplicate run' }, { status: 'cancelled', last_error: 'duplicate run' },
    ]);
    expect(await statusOf(outside)).toBe('queued');
  });

  it('refuses bad input naming the field and shows the engine\'s refusals, re-rendering the form and writing nothing', async () => {
    const before = await snapshot();
    // [form, message, found by the form's own check (before the engine, and before a confirm's seal)]
    const cases: Array<[Record<string, string>, string, boolean]> = [
      [{ op: 'delete' }, 'op: must be one of retry, cancel', true],
      [{ op: 'retry', type: 'Uppercase!' }, 'type: is not a job type name', true],
      [{ op: 'retry', createdAfter: 'yesterday' }, 'createdAfter: must be a time', true],
      [{ op: 'retry', fingerprint: 'zz' }, 'fingerprint: must be 16 hex digits', true],
      [{ op: 'cancel', type: 'uppercase', reason: `stop ${CANARY}` }, 'reason holds a secret value', true],
      [{ op: 'retry' }, 'an empty filter would requeue every job it may', false],
      [{ op: 'retry', status: 'queued' }, 'filter.status: requeue takes jobs that are failed, cancelled, oom_killed, not queued', false],
      [{ op: 'retry', type: 'no_such_type' }, 'filter.type: unknown job type', false],
      [{ op: 'cancel', type: 'uppercase', finishedAfter: '2030-01-01T00:00' }, 'filter.finishedAfter: the jobs cancel takes have not finished', false],
    ];
    for (const [form, message, formLevel] of cases) {
      const label = JSON.stringify(form);
      const dry = await post('/dashboard/bulk/preview', form);
      expect(dry.status, label).toBe(400);
      expect(dry.text, label).toContain(message);
      expect(dry.text).toContain('id="bulk-form"');
      expect(dry.text).not.toContain(CANARY);
      // a confirm never sealed: the form's own check first, else the seal's refusal
      const confirm = await post('/dashboard/bulk/apply', form);
      expect(confirm.status, label).toBe(formLevel ? 400 : 409);
      expect(confirm.text, label).toContain(formLevel ? message : 'This is not the filter the dry run showed');
    }
    expect(await snapshot()).toEqual(before);
  });

  it('the bulk page takes a starting filter from a link, and the jobs page links to it', async () => {
    const res = await page(`/dashboard/bulk?op=retry&type=uppercase&fingerprint=${fingerprint}&createdAfter=2030-01-01T00:00:00.000Z`);
    expect(res.text).toContain('<option value="uppercase" selected="">uppercase</option>');
    expect(res.text).toContain(`<input name="fingerprint" value="${fingerprint}"`);
    expect(res.text).toContain('name="createdAfter" value="2030-01-01T00:00:00"');
    const jobs = await page('/dashboard/jobs?status=failed&type=uppercase');
    expect(jobs.text).toContain('<a href="/dashboard/bulk?op=retry&amp;type=uppercase&amp;status=failed" id="bulk-link">');
  });
});

describe('a bulk retry larger than one request walks', () => {
  it(`stops after ${BULK_MAX_JOBS} jobs and offers to go on from there; going on takes the rest`, async () => {
    // countdown is paused: the requeued jobs stay queued (no kick runs them)
    await h.sql`select worker.pause_claims('type', 'countdown', 'test', 'bulk edge')`;
    const jobs = Array.from({ length: BULK_MAX_JOBS + 1 }, () => ({ type: 'countdown', payload: { n: 1 }, runAt: '2099-01-01T00:00:00Z' }));
    const ids = (await h.sql`select j->>'id' as id from worker.enqueue_jobs(${h.sql.json(jobs)}::jsonb) j`).map((r) => r.id as string);
    await h.sql`select worker.fail_job(id, 'bulk edge 42') from unnest(${ids}::uuid[]) id`;
    const fingerprint = await errorFingerprint(h.sql, 'bulk edge 42');

    const dry = await post('/dashboard/bulk/preview', { op: 'retry', type: 'countdown', fingerprint });
    expect(dry.text).toContain(`Dry run: ${BULK_MAX_JOBS + 1} jobs would be requeued`);
    const first = await post('/dashboard/bulk/apply', formFields(dry.text, 'bulk-confirm'));
    expect(first.text).toContain(`<tr data-count="requeued"><th>requeued</th><td>${BULK_MAX_JOBS}</td></tr>`);
    const more = formFields(first.text, 'bulk-continue');
    expect(more.cursor).toMatch(/^[0-9a-f-]{36}$/);
    expect((await post('/dashboard/bulk/apply', { ...more, cursor: 'not-a-cursor' })).text).toContain('cursor: is not a job id');
    const rest = await post('/dashboard/bulk/apply', more);
    expect(rest.text).toContain('<tr data-count="requeued"><th>requeued</th><td>1</td></tr>');
    expect(rest.text).not.toContain('id="bulk-continue"');
    expect(await h.sql`select status, count(*)::int as n from worker.jobs where id = any(${ids}::uuid[]) group by status`).toEqual([{ status: 'queued', n: BULK_MAX_JOBS + 1 }]);
    await h.sql`delete from worker.jobs where id = any(${ids}::uuid[])`;
    await h.sql`select worker.resume_claims('type', 'countdown')`;
  }, 60_000);
});
