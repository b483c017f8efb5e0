import { describe, expect, it } from 'vitest';
import { getJob } from '../../queue/index.ts';
import { handleDepotWebhook } from '../../functions/platform/build/depot-webhook.ts';
import { signDepotWebhook } from '../../functions/platform/build/depot-webhook-signature.ts';
import type { BuildService } from '../../functions/platform/build/ports/build-service.ts';
import { SANDBOX_DEPOT_WEBHOOK_SECRET, type DepotWebhookDelivery } from '../../sandbox/depot-webhooks.ts';
import { buildHarness, depotCalls, sandboxControl, scriptBuild, buildTestContext, type BuildHarness, type BuildHarnessOptions } from '../support/build-fakes.ts';

/**
 * Depot's build-finished webhook ends a build's wait between polls; polling stays the fallback.
 * The sandbox Depot makes each delivery (signed, recorded); these tests relay it to the handler
 * behind POST /webhooks/depot (test/worker/build-webhook.test.ts runs the route itself).
 */

const t = buildTestContext();

const SHA = 'a1b2c3d4e5f60718293a4b5c6d7e8f9012345678';
const SECRET = SANDBOX_DEPOT_WEBHOOK_SECRET;
const seconds = (d: Date) => Math.floor(d.getTime() / 1000);

async function started(options: BuildHarnessOptions & { serviceId: string }) {
  // runs until the test finishes it at the sandbox (as a real build ends on its own)
  await scriptBuild(t.sandbox, { serviceId: options.serviceId, outcome: 'hang', polls: 4, lines: 8 });
  const h = buildHarness(t.db.sql, t.sandbox, { awaitWebhook: true, ...options });
  const job = await h.enqueueBuild({ serviceId: options.serviceId, branch: 'main', commitSha: SHA });
  await h.tick(); // submit
  const depotBuildId = (await getJob(t.db.sql, job.id))!.job.checkpoint.depot_build_id as string;
  return { h, jobId: job.id, depotBuildId };
}

/** End the build at the sandbox now (pinned time); its webhook delivery, recorded and not sent. */
async function finishAtDepot(h: BuildHarness, depotBuildId: string, body: Record<string, unknown> = {}): Promise<DepotWebhookDelivery> {
  const answer = (await sandboxControl(t.sandbox, 'POST', `/builds/${depotBuildId}/finish`, { timestamp: seconds(h.now()), ...body })) as { delivery: DepotWebhookDelivery };
  return answer.delivery;
}

const relay = (h: BuildHarness, delivery: Pick<DepotWebhookDelivery, 'body' | 'headers'>) =>
  handleDepotWebhook(t.db.sql, delivery.body, delivery.headers['depot-signature'], SECRET, { now: h.now() });

const polls = (depotBuildId: string) => depotCalls(t.sandbox, 'GetBuild', { buildId: depotBuildId }).length;
const claims = async (jobId: string) => (await getJob(t.db.sql, jobId))!.events.filter((e) => e.kind === 'claimed').length;
const keptFor = async (jobId: string) => Number((await t.db.sql`select count(*)::int as n from worker.signal_events where job_id = ${jobId}`)[0]!.n);
const signalRows = async () => (await t.db.sql`select (select count(*)::int from worker.signal_events) as events, (select count(*)::int from worker.signal_channels) as channels`)[0];

/**
 * Tick every 500 ms of pinned time until the build ends at Depot (after `buildMs`), then every
 * 1 ms while steps run and 500 ms while none is due, until the job ends.
 */
async function runToEnd(h: BuildHarness, jobId: string, depotBuildId: string, buildMs: number, onFinished: (d: DepotWebhookDelivery) => Promise<void>) {
  const start = h.now().getTime();
  let finished = false;
  for (let i = 0; i < 400; i++) {
    if (!finished && h.now().getTime() - start >= buildMs) {
      finished = true;
      await onFinished(await finishAtDepot(h, depotBuildId));
    }
    const ran = await h.tick(finished ? 1 : 500);
    const { job } = (await getJob(t.db.sql, jobId))!;
    if (['done', 'failed'].includes(job.status)) return { job, msAfterFinish: h.now().getTime() - start - buildMs };
    if (finished && ran.claimed === 0) h.advance(499);
  }
  throw new Error('the build job did not end');
}

describe('build job with Depot\'s webhook', () => {
  it('finishes on the webhook at once, with fewer polls than polling alone (measured)', async () => {
    const BUILD_MS = 20_000;
    const figures: Record<string, { polls: number; claims: number; msAfterFinish: number }> = {};
    const cases: Array<[string, BuildHarnessOptions, boolean]> = [
      ['polling alone, every 2 s', { projectId: 'proj-wh-poll', awaitWebhook: false }, false],
      ['webhook, polls every 2 s', { projectId: 'proj-wh-2s' }, true],
      ['webhook, polls every 10 s', { projectId: 'proj-wh-10s', webhookPollIntervalMs: 10_000 }, true],
    ];
    for (const [name, options, deliver] of cases) {
      const { h, jobId, depotBuildId } = await started({ ...options, serviceId: `svc-${options.projectId}` });
      const { job, msAfterFinish } = await runToEnd(h, jobId, depotBuildId, BUILD_MS, async (delivery) => {
        if (deliver) expect((await relay(h, delivery)).body).toMatchObject({ outcome: 'signalled', buildJobId: jobId });
      });
      expect(job.status).toBe('done');
      expect((await h.archive.read(jobId))!.lastSeq).toBe(8); // the final poll read the log to its end
      expect(await keptFor(jobId)).toBe(0);
      figures[name] = { polls: polls(depotBuildId), claims: await claims(jobId), msAfterFinish };
    }
    console.log('polls per 20 s build (poll interval 2 s):', JSON.stringify(figures));
    const [alone, same, longer] = Object.values(figures) as [typeof figures[string], typeof figures[string], typeof figures[string]];
    // woken by the webhook (a poll, then finish after its 1 ms wait), not by the next poll
    expect(same.msAfterFinish).toBeLessThan(10);
    expect(longer.msAfterFinish).toBeLessThan(10);
    expect(alone.msAfterFinish).toBeGreaterThan(1000);
    expect(same.polls).toBeLessThanOrEqual(alone.polls);
    expect(longer.polls).toBeLessThan(alone.polls / 3);
    expect(longer.claims).toBeLessThan(alone.claims / 2);
  });

  it('a build whose webhook never arrives still finishes by polling', async () => {
    const { h, jobId, depotBuildId } = await started({ projectId: 'proj-wh-lost', serviceId: 'svc-wh-lost' });
    const { job } = await runToEnd(h, jobId, depotBuildId, 5_000, async () => {});
    expect(job.status).toBe('done');
    const kinds = (await getJob(t.db.sql, jobId))!.events.map((e) => e.kind);
    expect(kinds.filter((k) => k === 'wait_timed_out').length).toBeGreaterThanOrEqual(3);
    expect(kinds).not.toContain('signalled');
    expect(polls(depotBuildId)).toBe(3); // at 2, 4 and 6 s (it ended at 5 s); finish reads the checkpoint
  });

  it('a webhook that comes while a poll runs is kept for the job and ends its next wait at once', async () => {
    let h: BuildHarness;
    let delivered: Awaited<ReturnType<typeof relay>> | undefined;
    let buildId = '';
    // the adapter, but the first poll's status read "running" is followed by the build ending and
    // its webhook arriving before the poll settles
    const wrap = (depot: BuildService): BuildService =>
      Object.assign(Object.create(depot) as BuildService, {
        async status(id: string, o?: { signal?: AbortSignal }) {
          const status = await depot.status(id, o);
          if (!delivered && status.state === 'running') delivered = await relay(h, await finishAtDepot(h, buildId));
          return status;
        },
      });
    const run = await started({ projectId: 'proj-wh-race', serviceId: 'svc-wh-race', wrap });
    h = run.h;
    buildId = run.depotBuildId;
    const jobIdOf = run.jobId;
    // the poll that raced the webhook, then (its wait took the kept event: due at once, not in
    // 2 s) the poll that sees the build ended, in the same pass at the same pinned time
    expect(await h.tick(2000)).toMatchObject({ claimed: 2 });
    expect(delivered!.body).toMatchObject({ outcome: 'kept' });
    const events = (await getJob(t.db.sql, jobIdOf))!.events;
    const pollClaims = events.filter((e) => e.kind === 'claimed').slice(1);
    expect(pollClaims.map((e) => e.at.getTime())).toEqual([h.now().getTime(), h.now().getTime()]);
    expect(events.find((e) => e.kind === 'signalled')?.detail).toMatchObject({ delivered: false });
    await h.tick(1); // finish, after the 1 ms wait
    expect((await getJob(t.db.sql, jobIdOf))!.job.status).toBe('done');
    expect(await keptFor(jobIdOf)).toBe(0);
    expect(polls(buildId)).toBe(2);
  });

  it('a webhook that comes before submit checkpointed the build is dropped, and polling finishes the build', async () => {
    let h: BuildHarness;
    let early: Awaited<ReturnType<typeof relay>> | undefined;
    // Depot accepted the build, which ended and sent its webhook before the submit step settled
    const wrap = (depot: BuildService): BuildService =>
      Object.assign(Object.create(depot) as BuildService, {
        async submit(request: Parameters<BuildService['submit']>[0], o?: { signal?: AbortSignal }) {
          const accepted = await depot.submit(request, o);
          early = await relay(h, await finishAtDepot(h, accepted.buildId));
          return accepted;
        },
      });
    await scriptBuild(t.sandbox, { serviceId: 'svc-wh-early', outcome: 'hang', polls: 4, lines: 8 });
    h = buildHarness(t.db.sql, t.sandbox, { projectId: 'proj-wh-early', awaitWebhook: true, wrap });
    const rows = await signalRows();
    const job = await h.enqueueBuild({ serviceId: 'svc-wh-early', branch: 'main', commitSha: SHA });
    await h.tick(); // submit
    expect(early!.body).toMatchObject({ outcome: 'unknown_build' });
    // no event kept (the channel row the submit's own wait made aside)
    expect((await signalRows())!.events).toBe(rows!.events);
    await h.tick(2000); // the first poll finds it ended
    await h.tick(1);
    expect((await getJob(t.db.sql, job.id))!.job.status).toBe('done');
  });

  it('refuses forged, tampered, old and future signatures and writes nothing', async () => {
    const { h, jobId, depotBuildId } = await started({ projectId: 'proj-wh-forged', serviceId: 'svc-wh-forged' });
    const delivery = await finishAtDepot(h, depotBuildId);
    const before = { job: (await getJob(t.db.sql, jobId))!, rows: await signalRows() };
    const now = seconds(h.now());
    const forged = [
      ['wrong secret', delivery.body, await signDepotWebhook(delivery.body, 'not-the-secret', now)],
      ['tampered body', delivery.body.replace('STATUS_SUCCESS', 'STATUS_FAILED'), delivery.headers['depot-signature']],
      ['no header', delivery.body, undefined],
      ['no timestamp', delivery.body, delivery.headers['depot-signature']!.replace(/^t=\d+,/, '')],
      ['signed 301 s ago', delivery.body, await signDepotWebhook(delivery.body, SECRET, now - 301)],
      ['signed 301 s ahead', delivery.body, await signDepotWebhook(delivery.body, SECRET, now + 301)],
      ['not hex', delivery.body, `t=${now},v1=zz`],
    ] as const;
    for (const [name, body, header] of forged) {
      const answer = await handleDepotWebhook(t.db.sql, body, header, SECRET, { now: h.now() });
      expect(answer, name).toMatchObject({ status: 400, body: { code: 'bad_signature' } });
    }
    expect(await signalRows()).toEqual(before.rows);
    expect((await getJob(t.db.sql, jobId))!).toEqual(before.job);
    // 300 s old is still inside the tolerance
    const edge = await handleDepotWebhook(t.db.sql, delivery.body, await signDepotWebhook(delivery.body, SECRET, now - 300), SECRET, { now: h.now() });
    expect(edge.body).toMatchObject({ outcome: 'signalled' });
  });

  it('a duplicate delivery is harmless: the build finishes once, and no event is left behind', async () => {
    const { h, jobId, depotBuildId } = await started({ projectId: 'proj-wh-dup', serviceId: 'svc-wh-dup' });
    const delivery = await finishAtDepot(h, depotBuildId);
    expect((await relay(h, delivery)).body).toMatchObject({ outcome: 'signalled' });
    const again = (await sandboxControl(t.sandbox, 'POST', `/webhooks/${delivery.id}/redeliver`, { timestamp: seconds(h.now()) })) as { delivery: DepotWebhookDelivery };
    expect(again.delivery.body).toBe(delivery.body);
    expect((await relay(h, again.delivery)).body).toMatchObject({ outcome: 'kept' }); // the job is due, not waiting
    await h.tick(0); // poll: ended; its 1 ms wait before finish takes the duplicate
    await h.tick(1); // finish
    const { job, events } = (await getJob(t.db.sql, jobId))!;
    expect(job.status).toBe('done');
    expect(events.filter((e) => e.kind === 'done')).toHaveLength(1);
    expect(await keptFor(jobId)).toBe(0);
    // a third, after the job ended: acknowledged, nothing written
    const rows = await signalRows();
    expect((await relay(h, again.delivery)).body).toMatchObject({ outcome: 'unknown_build' });
    expect(await signalRows()).toEqual(rows);
  });

  it('acknowledges an unknown build, another project\'s build and other event types without writing anything', async () => {
    const now = new Date();
    const rows = await signalRows();
    const event = (data: Record<string, unknown>, type = 'build.finished') => JSON.stringify({ id: 'dwh_x', type, created: seconds(now), data });
    const cases = [
      [event({ projectId: 'proj-other', buildId: 'sbx-nobody', status: 'STATUS_SUCCESS' }), 'unknown_build'],
      [event({ projectId: 'proj-other', buildId: 'sbx-nobody', status: 'STATUS_RUNNING' }), 'ignored'],
      [event({ projectId: 'proj-other', buildId: 'sbx-nobody', status: 'STATUS_SUCCESS' }, 'build.started'), 'ignored'],
    ] as const;
    for (const [body, outcome] of cases) {
      const answer = await handleDepotWebhook(t.db.sql, body, await signDepotWebhook(body, SECRET), SECRET, { now });
      expect(answer).toMatchObject({ status: 200, body: { outcome } });
    }
    const mine = event({ projectId: 'proj-other', buildId: 'sbx-nobody', status: 'STATUS_SUCCESS' });
    const scoped = await handleDepotWebhook(t.db.sql, mine, await signDepotWebhook(mine, SECRET), SECRET, { now, projectId: 'proj-ours' });
    expect(scoped.body).toMatchObject({ outcome: 'ignored' });
    expect(await signalRows()).toEqual(rows);
  });

  it('answers a signed event without its fields with 400 naming the field', async () => {
    const now = new Date();
    const cases = [
      [JSON.stringify({ id: 'dwh_1', type: 'build.finished', created: 1, data: { status: 'STATUS_SUCCESS' } }), 'data.buildId'],
      [JSON.stringify({ id: 'dwh_1', type: 'build.finished', data: { buildId: 'b', status: 'STATUS_SUCCESS' } }), 'created'],
      [JSON.stringify({ type: 'build.finished', created: 1, data: { buildId: 'b', status: 'STATUS_SUCCESS' } }), 'id'],
      ['{"id": ', undefined],
    ] as const;
    for (const [body, field] of cases) {
      const answer = await handleDepotWebhook(t.db.sql, body, await signDepotWebhook(body, SECRET), SECRET, { now });
      expect(answer).toMatchObject({ status: 400, body: { code: 'invalid_event', ...(field ? { field } : {}) } });
    }
  });

  it('a failed build woken by its webhook fails the job with the build\'s error from Depot\'s API', async () => {
    const { h, jobId, depotBuildId } = await started({ projectId: 'proj-wh-fail', serviceId: 'svc-wh-fail' });
    await h.tick(2000);
    const delivery = await finishAtDepot(h, depotBuildId, { outcome: 'fail', error: 'npm ERR! missing script: build' });
    expect((await relay(h, delivery)).body).toMatchObject({ outcome: 'signalled' });
    await h.tick(0);
    await h.tick(1);
    const { job } = (await getJob(t.db.sql, jobId))!;
    expect(job).toMatchObject({ status: 'failed', attempts: 1 });
    expect(job.lastError).toMatch(/failed: .*npm ERR! missing script: build/);
    expect(await keptFor(jobId)).toBe(0);
  });
});
