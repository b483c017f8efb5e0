import { beforeAll, describe, expect, it } from 'vitest';
import { signDepotWebhook } from '../../functions/platform/build/depot-webhook-signature.ts';
import { SANDBOX_DEPOT_WEBHOOK_SECRET } from '../../sandbox/depot-webhooks.ts';
import { createWorkerHarness, testEnv, type WorkerHarness } from './support.ts';

/**
 * POST /webhooks/depot in the Worker, and a build job on ticks that finishes on it: the poll
 * interval while the webhook is awaited is 10 minutes, so only the webhook can end the wait
 * within the test. The sandbox Depot makes the delivery (signed with its secret, recorded, not
 * sent: it cannot reach a Worker inside workerd); the test relays it as Depot would POST it.
 */

let h: WorkerHarness;
let unconfigured: WorkerHarness;
const sandbox = testEnv.TEST_SANDBOX_URL;
const TICK = '* * * * *';
const SECRET = SANDBOX_DEPOT_WEBHOOK_SECRET;
type Json = Record<string, any>;

beforeAll(async () => {
  const depot = { DEPOT_API_URL: sandbox, DEPOT_TOKEN: 'sandbox-depot-token', DEPOT_PROJECT_ID: 'starbase-webhook-test', TICK_BUDGET_MS: '3000', KICK_BUDGET_MS: '1000' };
  h = await createWorkerHarness({ ...depot, DEPOT_WEBHOOK_SECRET: SECRET, BUILD_POLL_INTERVAL_MS: '2000', BUILD_WEBHOOK_POLL_INTERVAL_MS: '600000' } as never);
  unconfigured = await createWorkerHarness({ ...depot, BUILD_POLL_INTERVAL_MS: '0' } as never);
});

async function pushedBuild(harness: WorkerHarness): Promise<{ jobId: string; depotBuildId: string }> {
  const serviceId = `svc-wh-${crypto.randomUUID().slice(0, 8)}`;
  await harness.sql`insert into platform.accounts (id) values ('acct-webhook-test') on conflict do nothing`;
  await harness.sql`insert into platform.services (id, account_id) values (${serviceId}, 'acct-webhook-test')`;
  await fetch(`${sandbox}/_sandbox/depot/script`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ serviceId, outcome: 'hang', polls: 1, lines: 5 }) });
  const res = await harness.request('/v1/pushes', { method: 'POST', token: 'enqueue', json: { accountId: 'acct-webhook-test', serviceId, branch: 'main', commitSha: 'abc1234' } });
  const { job } = (await res.json()) as { job: Json };
  await harness.sql`update worker.jobs set run_at = now() where id = ${job.id}`;
  await harness.trigger(TICK, new Date(), { TICK_BUDGET_MS: '500' } as never);
  const [row] = await harness.sql`select checkpoint->>'depot_build_id' as depot_build_id from worker.jobs where id = ${job.id}`;
  return { jobId: job.id, depotBuildId: row!.depot_build_id as string };
}

async function finishAtDepot(depotBuildId: string): Promise<{ body: string; headers: Record<string, string> }> {
  const res = await fetch(`${sandbox}/_sandbox/depot/builds/${depotBuildId}/finish`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  expect(res.status).toBe(200);
  return ((await res.json()) as { delivery: { body: string; headers: Record<string, string> } }).delivery;
}

const deliver = (harness: WorkerHarness, body: string, headers: Record<string, string>) =>
  harness.request('/webhooks/depot', { method: 'POST', token: null, headers: { 'content-type': 'application/json', ...headers }, body });

async function snapshot(jobId: string) {
  return {
    job: await h.sql`select status, step, run_at, checkpoint from worker.jobs where id = ${jobId}`,
    events: await h.sql`select count(*)::int as n from worker.job_events where job_id = ${jobId}`,
    kept: await h.sql`select count(*)::int as n from worker.signal_events`,
  };
}

describe('POST /webhooks/depot', () => {
  it('wakes the waiting build job, which reads Depot, archives the rest of the log and finishes', async () => {
    const { jobId, depotBuildId } = await pushedBuild(h);
    const [waiting] = await h.sql`select status, step, run_at > now() + interval '5 minutes' as far from worker.jobs where id = ${jobId}`;
    expect(waiting).toEqual({ status: 'queued', step: 'poll', far: true });
    const delivery = await finishAtDepot(depotBuildId);
    const res = await deliver(h, delivery.body, delivery.headers);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ received: true, type: 'build.finished', outcome: 'signalled', buildJobId: jobId });
    await h.trigger(TICK);
    const [row] = await h.sql`select status from worker.jobs where id = ${jobId}`;
    expect(row!.status).toBe('done');
    const claims = await h.sql`select detail->>'step' as step from worker.job_history where job_id = ${jobId} and kind = 'claimed' order by id`;
    expect(claims.map((c) => c.step)).toEqual(['start', 'poll', 'finish']);
    const logs = await h.request(`/v1/builds/${jobId}/logs`, { token: 'enqueue' });
    expect((await logs.text()).split('\n').filter(Boolean)).toHaveLength(5);
    // a repeat after the job ended is acknowledged and writes nothing
    const before = await snapshot(jobId);
    const again = await deliver(h, delivery.body, { 'depot-signature': await signDepotWebhook(delivery.body, SECRET) });
    expect(await again.json()).toMatchObject({ outcome: 'unknown_build' });
    expect(await snapshot(jobId)).toEqual(before);
  });

  it('refuses a forged or replayed signature with 400 bad_signature and writes nothing', async () => {
    const { jobId, depotBuildId } = await pushedBuild(h);
    const delivery = await finishAtDepot(depotBuildId);
    const before = await snapshot(jobId);
    const old = Math.floor(Date.now() / 1000) - 600;
    for (const signature of [await signDepotWebhook(delivery.body, 'someone-else'), await signDepotWebhook(delivery.body, SECRET, old), null]) {
      const res = await deliver(h, delivery.body, signature ? { 'depot-signature': signature } : {});
      expect(res.status).toBe(400);
      expect(((await res.json()) as Json).error.code).toBe('bad_signature');
    }
    expect(await snapshot(jobId)).toEqual(before);
    await h.request(`/v1/jobs/${jobId}/cancel`, { method: 'POST', json: {} });
  });

  it('answers 503 naming DEPOT_WEBHOOK_SECRET when it is not set, and the build still finishes by polling', async () => {
    const { jobId, depotBuildId } = await pushedBuild(unconfigured);
    const delivery = await finishAtDepot(depotBuildId);
    const res = await deliver(unconfigured, delivery.body, delivery.headers);
    expect(res.status).toBe(503);
    expect(((await res.json()) as Json).error.message).toContain('DEPOT_WEBHOOK_SECRET');
    await unconfigured.trigger(TICK);
    const [row] = await unconfigured.sql`select status from worker.jobs where id = ${jobId}`;
    expect(row!.status).toBe('done');
    const kinds = await unconfigured.sql`select kind from worker.job_history where job_id = ${jobId} and kind in ('waiting', 'signalled')`;
    expect(kinds).toHaveLength(0); // plain delayed polls: no wait without the webhook
  });
});
