import { env } from 'cloudflare:test';
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { countJobs, createWorkerHarness, relayMessages, sandboxBuildEnv, testEnv, type WorkerHarness } from './support.ts';

let h: WorkerHarness;
const sandbox = testEnv.TEST_SANDBOX_URL;
beforeAll(async () => {
  h = await createWorkerHarness(sandboxBuildEnv());
});

beforeEach(async () => {
  await h.sql`update worker.jobs set status = 'cancelled', finished_at = now() where status = 'queued' and started_at is null`;
});

const TICK = '* * * * *';
const uid = () => crypto.randomUUID().slice(0, 8);
type Json = Record<string, any>;

async function script(body: Json) {
  const res = await fetch(`${sandbox}/_sandbox/depot/script`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  expect(res.status).toBe(200);
}
async function buildsOf(serviceId: string): Promise<Json[]> {
  const builds = (await (await fetch(`${sandbox}/_sandbox/depot/builds`)).json()) as { builds: Json[] };
  return builds.builds.filter((b) => b.serviceId === serviceId);
}

/** A service row, as the platform creates it with its account: a push must name one. */
async function newService(): Promise<string> {
  const id = `svc-${uid()}`;
  await h.sql`insert into platform.accounts (id) values ('acct-build-test') on conflict do nothing`;
  await h.sql`insert into platform.services (id, account_id) values (${id}, 'acct-build-test')`;
  return id;
}

async function push(serviceId: string, branch = 'main', commitSha = 'abc1234') {
  const res = await h.request('/v1/pushes', { method: 'POST', token: 'enqueue', json: { accountId: 'acct-build-test', serviceId, branch, commitSha } });
  expect(res.status).toBe(201);
  return (await res.json()) as { job: Json; superseded: string | null };
}

async function runNow(id: string) {
  await h.sql`update worker.jobs set run_at = now() where id = ${id}`;
}

describe('POST /v1/pushes', () => {
  it('debounces: a second push inside the window supersedes the first and runs 5 s later', async () => {
    const svc = await newService();
    const first = await push(svc, 'main', 'aaaaaaa');
    expect(Date.parse(first.job.runAt) - Date.parse(first.job.createdAt)).toBe(5000);
    expect(first.job.dedupeKey).toBe(`deploy:${svc}:main`);
    const second = await push(svc, 'main', 'bbbbbbb');
    expect(second.superseded).toBe(first.job.id);
    const [old] = await h.sql`select status, superseded_by from worker.jobs where id = ${first.job.id}`;
    expect(old).toEqual({ status: 'cancelled', superseded_by: second.job.id });
    // another branch is its own key
    expect((await push(svc, 'feature', 'ccccccc')).superseded).toBeNull();
  });

  it('a push while a build for the key runs waits behind it', async () => {
    const svc = await newService();
    await script({ serviceId: svc, outcome: 'hang', polls: 1, lines: 2 });
    const first = await push(svc);
    await runNow(first.job.id);
    await h.trigger(TICK, new Date(), { TICK_BUDGET_MS: '300' } as never);
    const second = await push(svc, 'main', 'ddddddd');
    expect(second.superseded).toBeNull();
    await runNow(second.job.id);
    await h.trigger(TICK, new Date(), { TICK_BUDGET_MS: '300' } as never);
    const [waiting] = await h.sql`select status, started_at from worker.jobs where id = ${second.job.id}`;
    expect(waiting).toEqual({ status: 'queued', started_at: null });
    await h.request(`/v1/jobs/${first.job.id}/cancel`, { method: 'POST', json: {} });
    await h.request(`/v1/jobs/${second.job.id}/cancel`, { method: 'POST', json: {} });
  });

  it('answers 404 for a service that does not exist, writing nothing', async () => {
    const before = await countJobs(h.sql);
    const unknown = `svc-${uid()}`;
    const res = await h.request('/v1/pushes', { method: 'POST', token: 'enqueue', json: { accountId: 'acct-build-test', serviceId: unknown, branch: 'main', commitSha: 'abc1234' } });
    expect(res.status).toBe(404);
    expect(((await res.json()) as Json).error).toMatchObject({ code: 'not_found', message: `no service ${unknown}` });
    expect(await countJobs(h.sql)).toBe(before);
    expect(await h.sql`select 1 from platform.services where id = ${unknown}`).toEqual([]);
  });

  it('refuses a bad push, naming the field, writing nothing', async () => {
    const before = await countJobs(h.sql);
    const res = await h.request('/v1/pushes', { method: 'POST', json: { accountId: 'acct-build-test', serviceId: 'x', branch: 'main', commitSha: 'not hex!' } });
    expect(res.status).toBe(400);
    expect(((await res.json()) as Json).error.field).toBe('commitSha');
    expect(await countJobs(h.sql)).toBe(before);
  });
});

describe('the build job on ticks', () => {
  it('submits, polls and finishes: desired state set, one archive object equal to the build log', async () => {
    const svc = await newService();
    await script({ serviceId: svc, outcome: 'succeed', polls: 3, lines: 17 });
    const { job } = await push(svc, 'main', 'feedbee');
    await runNow(job.id);
    await h.trigger(TICK);
    const [row] = await h.sql`select status, result, checkpoint from worker.jobs where id = ${job.id}`;
    expect(row!.status).toBe('done');
    const [service] = await h.sql`select desired_state from platform.services where id = ${svc}`;
    expect(service!.desired_state.image).toMatchObject({ commitSha: 'feedbee', buildId: job.id, depotBuildId: row!.checkpoint.depot_build_id });
    const builds = await buildsOf(svc);
    expect(builds).toHaveLength(1); // exactly one CreateBuild
    const expected = await (await fetch(`${sandbox}/_sandbox/depot/builds/${builds[0]!.buildId}/log`)).text();
    const object = await (env as unknown as { BUILD_LOGS: R2Bucket }).BUILD_LOGS.get(`builds/${job.id}.log`);
    expect(await object!.text()).toBe(expected);
    const logs = await h.request(`/v1/builds/${job.id}/logs`, { token: 'enqueue' });
    expect(logs.headers.get('x-build-status')).toBe('done');
    expect(await logs.text()).toBe(expected);
    const events = await h.sql`select kind, detail->>'step' as step from worker.job_history where job_id = ${job.id} and kind in ('claimed') order by id`;
    expect(events.map((e) => e.step)).toEqual(['start', 'poll', 'poll', 'poll', 'poll', 'finish']);
  });

  it('a failed build ends the job failed with the build error and no desired-state change', async () => {
    const svc = await newService();
    await script({ serviceId: svc, outcome: 'fail', polls: 1, lines: 4, error: 'npm ERR! missing script: build' });
    const { job } = await push(svc);
    await runNow(job.id);
    await h.trigger(TICK);
    const [row] = await h.sql`select status, last_error from worker.jobs where id = ${job.id}`;
    expect(row!.status).toBe('failed');
    expect(row!.last_error).toContain('npm ERR! missing script: build');
    expect(await h.sql`select desired_state from platform.services where id = ${svc}`).toEqual([{ desired_state: {} }]);
  });

  it('a live viewer receives the lines as the poll steps read them, then the end', async () => {
    const svc = await newService();
    await script({ serviceId: svc, outcome: 'succeed', polls: 2, lines: 9 });
    const { job } = await push(svc);
    const res = await h.request(`/v1/builds/${job.id}/logs`, { token: 'enqueue', headers: { upgrade: 'websocket' } });
    expect(res.status).toBe(101);
    const { received, ended } = relayMessages(res);
    await runNow(job.id);
    await h.trigger(TICK);
    await ended;
    const lines = received.filter((m) => m.type === 'lines').flatMap((m) => m.lines);
    expect(lines.map((l: Json) => l.seq)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(received.at(-1)).toEqual({ type: 'end', outcome: 'succeeded' });
  });

  it('cancelling the job cancels the build at the provider', async () => {
    const svc = await newService();
    await script({ serviceId: svc, outcome: 'hang', polls: 1, lines: 3 });
    const { job } = await push(svc);
    await runNow(job.id);
    await h.trigger(TICK, new Date(), { TICK_BUDGET_MS: '300' } as never);
    const res = await h.request(`/v1/jobs/${job.id}/cancel`, { method: 'POST', json: { reason: 'superseded by hotfix' } });
    expect(res.status).toBe(200);
    const [row] = await h.sql`select status from worker.jobs where id = ${job.id}`;
    expect(row!.status).toBe('cancelled');
    const [build] = await buildsOf(svc);
    const { calls } = (await (await fetch(`${sandbox}/_sandbox/calls?provider=depot`)).json()) as { calls: Json[] };
    const finish = calls.filter((c) => c.path.endsWith('/FinishBuild') && c.body?.buildId === build!.buildId);
    expect(finish).toHaveLength(1);
    expect(JSON.stringify(finish[0]!.body)).toContain('superseded by hotfix');
  });
});
