/// <reference types="vite/client" />
import { beforeAll, describe, expect, it } from 'vitest';
import { parseExposition } from '../../functions/lib/prometheus.ts';
import grafanaText from '../../ops/grafana/starbase-worker.json?raw';
import { createWorkerHarness, TOKENS, type WorkerHarness } from './support.ts';

/**
 * A job that has started and not finished — running, or queued between steps — is in progress
 * in the API (inProgress, currentStep, nextStepAt; attempts = failures of the current step), the
 * list filter, the metrics and the dashboard.
 */

let h: WorkerHarness;
let cookie = '';
const ids: Record<'between' | 'running' | 'retrying' | 'waiting', string> = { between: '', running: '', retrying: '', waiting: '' };

interface ApiJob {
  id: string;
  status: string;
  step: string;
  attempts: number;
  maxAttempts: number;
  runAt: string | null;
  inProgress: boolean;
  currentStep: string | null;
  nextStepAt: string | null;
}

const getJob = async (id: string) => ((await (await h.request(`/v1/jobs/${id}`)).json()) as { job: ApiJob }).job;

beforeAll(async () => {
  h = await createWorkerHarness();
  // between steps: a countdown whose first step ran in the enqueue's kick, its next due in a minute
  const res = await h.request('/v1/jobs', { method: 'POST', json: { type: 'countdown', payload: { n: 2, delayMs: 60_000 } } });
  ids.between = ((await res.json()) as { job: ApiJob }).job.id;
  const sqlJob = async () => (await h.sql`select id from worker.enqueue_job(type => 'countdown', payload => '{"n": 1}', run_at => now() + interval '1 hour')`)[0]!.id as string;
  [ids.running, ids.retrying, ids.waiting] = [await sqlJob(), await sqlJob(), await sqlJob()];
  // running its first try; and queued for the retry of a step that failed once
  await h.sql`update worker.jobs set status = 'running', attempts = 1, started_at = now(), claimed_at = now(), step = 'count',
                locked_until = now() + interval '1 hour', locked_by = 'host-9:run', lease_token = gen_random_uuid() where id = ${ids.running}`;
  await h.sql`update worker.jobs set attempts = 1, started_at = now() - interval '1 minute', last_error = 'provider said no',
                run_at = now() + interval '30 seconds' where id = ${ids.retrying}`;
  const login = await h.request('/dashboard/login', {
    method: 'POST', token: null,
    headers: { origin: 'http://worker.test', 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ token: TOKENS.admin, next: '/' }).toString(),
  });
  cookie = /^__Host-starbase_session=([^;]+)/.exec(login.headers.get('set-cookie')!)![1]!;
});

describe('the API', () => {
  it('shows a job between steps as in progress, its next step and when it is due, with 0 failures', async () => {
    const job = await getJob(ids.between);
    expect(job).toMatchObject({ status: 'queued', step: 'count', attempts: 0, inProgress: true, currentStep: 'count' });
    expect(job.nextStepAt).toBe(job.runAt);
    expect(Date.parse(job.nextStepAt!) - Date.now()).toBeGreaterThan(50_000);
    // an event's attempt is the try's number: the first step's first try was 1
    const { events } = (await (await h.request(`/v1/jobs/${ids.between}`)).json()) as { events: Array<{ kind: string; detail: Record<string, unknown> }> };
    expect(events.find((e) => e.kind === 'claimed')!.detail).toMatchObject({ attempt: 1, step: 'start' });
  });

  it('reads attempts as failures of the current step: 0 while the first try runs, 1 after a failed try', async () => {
    expect(await getJob(ids.running)).toMatchObject({ status: 'running', attempts: 0, inProgress: true, currentStep: 'count', nextStepAt: null });
    const retrying = await getJob(ids.retrying);
    expect(retrying).toMatchObject({ status: 'queued', attempts: 1, inProgress: true, currentStep: 'start' });
    expect(retrying.nextStepAt).toBe(retrying.runAt);
    expect(await getJob(ids.waiting)).toMatchObject({ status: 'queued', attempts: 0, inProgress: false, currentStep: null, nextStepAt: null });
  });

  it('lists jobs in progress, or those not, with ?inProgress=; refuses any other value naming the field', async () => {
    const list = async (q: string) => ((await (await h.request(`/v1/jobs?${q}`)).json()) as { jobs: ApiJob[] }).jobs.map((j) => j.id);
    expect(new Set(await list('inProgress=true'))).toEqual(new Set([ids.between, ids.running, ids.retrying]));
    const notInProgress = await list('inProgress=false&type=countdown');
    expect(notInProgress).toEqual([ids.waiting]);
    const bad = await h.request('/v1/jobs?inProgress=yes');
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ error: { code: 'invalid_input', field: 'inProgress' } });
  });
});

describe('GET /metrics', () => {
  it('counts jobs in progress by type and status: running, and queued between steps or for a retry', async () => {
    const text = await (await h.request('/metrics', { token: 'metrics' })).text();
    const family = parseExposition(text).find((f) => f.name === 'starbase_jobs_in_progress')!;
    expect(family.type).toBe('gauge');
    const value = (labels: Record<string, string>) => family.samples.find((s) => Object.entries(labels).every(([k, v]) => s.labels[k] === v))?.value;
    expect(value({ type: 'countdown', status: 'running' })).toBe(1);
    expect(value({ type: 'countdown', status: 'queued' })).toBe(2);
    expect(value({ type: 'uppercase', status: 'running' })).toBe(0); // every registered type, 0 included
  });
});

describe('the Grafana dashboard', () => {
  const sqlOf = (title: string) => {
    const panels = (JSON.parse(grafanaText) as { panels: Array<{ title: string; targets: Array<{ rawSql?: string }> }> }).panels;
    return panels.find((p) => p.title === title)!.targets[0]!.rawSql!;
  };

  it('reads attempts in Recent jobs, and failures in Active jobs, as the API does', async () => {
    // and two that ended: done on its first try (0 failures), failed on its only one (1)
    await h.request('/v1/jobs', { method: 'POST', json: { type: 'uppercase', payload: { text: 'done' } } });
    await h.request('/v1/jobs', { method: 'POST', json: { type: 'fail', payload: {}, maxAttempts: 1 } });
    const recent = await h.sql.unsafe(sqlOf('Recent jobs'));
    expect(recent.map((r) => r.status)).toEqual(expect.arrayContaining(['done', 'failed', 'running', 'queued']));
    expect(recent.find((r) => r.status === 'failed')!.attempts).toBe(1);
    for (const row of recent) expect(row.attempts, row.job as string).toBe((await getJob(row.job as string)).attempts);
    const active = await h.sql.unsafe(sqlOf('Active jobs'));
    expect(active).toEqual([expect.objectContaining({ job: ids.running, failures: 0 })]);
  });
});

describe('the dashboard', () => {
  const page = async (path: string) => (await h.request(path, { token: null, headers: { cookie: `__Host-starbase_session=${cookie}` } })).text();

  it('counts and lists jobs in progress, those between steps included, with their step and when the next is due', async () => {
    const html = await page('/');
    expect(html).toMatch(/data-counter="in_progress"[^>]*><div class="label">in progress<\/div><div class="n">3<\/div>/);
    expect(html).toContain('In progress (3: 1 running, 2 between steps)');
    const row = (id: string) => new RegExp(`data-in-progress="${id}">(.*?)</tr>`).exec(html)?.[1] ?? '';
    expect(row(ids.running)).toMatch(/<td>count<\/td><td class="mono">host-9:run<\/td><td>running for \d+s<\/td><td>0<\/td>/);
    expect(row(ids.between)).toMatch(/<td>count<\/td><td class="mono">–<\/td><td>next step <time datetime="[^"]+" title="[^"]+">in 5\ds<\/time><\/td><td>0<\/td>/);
    expect(row(ids.retrying)).toMatch(/<td>start<\/td>.*<td>next step <time [^>]+>in \d+s<\/time><\/td><td>1<\/td>/);
    expect(row(ids.waiting)).toBe(''); // never started: not in progress

    const filtered = await page('/?inProgress=true');
    expect(filtered).toContain(`data-job="${ids.between}"`);
    expect(filtered).not.toContain(`data-job="${ids.waiting}"`);
    expect(filtered).toContain('name="inProgress" value="true" checked=""');
    expect(filtered).toMatch(new RegExp(`data-job="${ids.between}">.*?data-status="queued">queued</span><span class="muted" data-between-steps=""> in progress</span>`));
  });

  it('shows on the job page whether the job is in progress, its current step, when the next is due, and its failures', async () => {
    const between = await page(`/dashboard/jobs/${ids.between}`);
    expect(between).toMatch(/<dd id="in-progress" data-in-progress="true">yes: waiting, step count due in 5\ds \(\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ\)<\/dd>/);
    expect(between).toContain('<dd id="failures">0 of 3 (of the current step)</dd>');
    const running = await page(`/dashboard/jobs/${ids.running}`);
    expect(running).toContain('<dd id="in-progress" data-in-progress="true">yes: running step count, attempt 1 of 3</dd>');
    expect(await page(`/dashboard/jobs/${ids.retrying}`)).toContain('<dd id="failures">1 of 3 (of the current step)</dd>');
    expect(await page(`/dashboard/jobs/${ids.waiting}`)).toContain('<dd id="in-progress" data-in-progress="false">no: not started</dd>');
  });
});
