import { beforeAll, describe, expect, it } from 'vitest';
import type { BuildService } from '../../functions/platform/build/ports/build-service.ts';
import { cancelJob, getJob, type Job } from '../../queue/index.ts';
import type { SandboxHandle } from '../../sandbox/server.ts';
import { buildHarness, depotCalls, sandboxLog, scriptBuild, type BuildHarness } from '../support/build-fakes.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { createTestSandbox } from '../support/sandbox.ts';

let db: TestDatabase;
let sandbox: SandboxHandle;
beforeAll(async () => {
  db = await createTestDatabase();
  sandbox = await createTestSandbox();
});

const SHA = '0123456789abcdef0123456789abcdef01234567';
const LEASE = 120_000;

async function jobOf(id: string): Promise<Job> {
  return (await getJob(db.sql, id))!.job;
}

/** Tick every poll interval until the job is terminal. */
async function drive(h: BuildHarness, id: string): Promise<Job> {
  for (let i = 0; i < 20; i++) {
    const job = await jobOf(id);
    if (['done', 'failed', 'cancelled', 'oom_killed'].includes(job.status)) return job;
    await h.tick(2000);
  }
  throw new Error(`job ${id} did not finish`);
}

/** The archive must hold the sandbox's log byte for byte: no line lost, none doubled. */
async function expectArchiveExact(h: BuildHarness, job: Job, lines: number): Promise<void> {
  const depotBuildId = job.checkpoint.depot_build_id as string;
  expect(await h.archive.read(job.id)).toEqual({ text: await sandboxLog(sandbox, depotBuildId), lastSeq: lines });
}

describe('build job across crashes', () => {
  it('crash mid-poll (lines archived, checkpoint not written): re-polls, one CreateBuild, archive exact', async () => {
    await scriptBuild(sandbox, { serviceId: 'svc-crash-poll', outcome: 'succeed', polls: 3, lines: 12 });
    const h = buildHarness(db.sql, sandbox, { projectId: 'proj-crash-poll' });
    const { id } = await h.enqueueBuild({ serviceId: 'svc-crash-poll', branch: 'main', commitSha: SHA });
    await h.tick(); // submit
    await h.tick(2000); // poll 1: lines 1–3
    h.advance(2000);
    const crash = await h.crashStep(); // poll 2 archives and relays lines 4–6, then the process dies
    expect(crash.job.step).toBe('poll');
    expect(crash.result).toMatchObject({ outcome: 'continue', step: 'poll' });
    const crashed = await jobOf(id);
    expect(crashed).toMatchObject({ status: 'running', lockedBy: 'doomed' });
    expect((crashed.checkpoint.log_cursor as { lastSeq: number }).lastSeq).toBe(3);
    expect((await h.archive.read(id))!.lastSeq).toBe(6);

    expect(await h.tick(2000)).toMatchObject({ claimed: 0 }); // the lease still holds
    expect(await h.tick(LEASE)).toMatchObject({ claimed: 1, continued: 1 }); // rescued, re-polled from the checkpoint
    const done = await drive(h, id);
    expect(done).toMatchObject({ status: 'done', crashes: 1 });

    expect(depotCalls(sandbox, 'CreateBuild', { projectId: 'proj-crash-poll' })).toHaveLength(1);
    await expectArchiveExact(h, done, 12);
    // Viewers were sent lines 4–6 twice (once by the dead step), with the same numbers and text.
    const relayed = h.relay.linesOf(id);
    expect(relayed.map((l) => l.seq)).toEqual([1, 2, 3, 4, 5, 6, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
    expect(relayed.slice(6, 9)).toEqual(relayed.slice(3, 6));
    const kinds = (await getJob(db.sql, id))!.events.map((e) => e.kind);
    expect(kinds).toContain('lease_expired');
  });

  it('crash between the provider accepting the build and the checkpoint: the re-run adopts it (one CreateBuild)', async () => {
    await scriptBuild(sandbox, { serviceId: 'svc-crash-submit', outcome: 'succeed', polls: 1, lines: 5 });
    const h = buildHarness(db.sql, sandbox, { projectId: 'proj-crash-submit' });
    const { id } = await h.enqueueBuild({ serviceId: 'svc-crash-submit', branch: 'main', commitSha: SHA });
    const crash = await h.crashStep(); // start: CreateBuild answered, then the process dies
    expect(crash.job.step).toBe('start');
    const created = depotCalls(sandbox, 'CreateBuild', { projectId: 'proj-crash-submit' });
    expect(created).toHaveLength(1);
    expect((await jobOf(id)).checkpoint).toEqual({});

    expect(await h.tick(LEASE + 1)).toMatchObject({ claimed: 1, continued: 1 });
    const adopted = await jobOf(id);
    expect(adopted).toMatchObject({ step: 'poll', attempts: 0 });
    expect(adopted.checkpoint).toMatchObject({ adopted: true, request_key: `starbase-build-${id}` });
    const done = await drive(h, id);
    expect(done.status).toBe('done');
    expect(depotCalls(sandbox, 'CreateBuild', { projectId: 'proj-crash-submit' })).toHaveLength(1);
    expect(depotCalls(sandbox, 'ListBuilds', { projectId: 'proj-crash-submit' })).toHaveLength(2); // before each submit attempt
    await expectArchiveExact(h, done, 5);
    expect(done.result).toMatchObject({ image: { depotBuildId: done.checkpoint.depot_build_id } });
  });

  it('the same window with a step that throws right after CreateBuild: the retry adopts the build', async () => {
    await scriptBuild(sandbox, { serviceId: 'svc-throw-submit', outcome: 'succeed', polls: 0, lines: 3 });
    let throwAfterSubmit = true;
    const h = buildHarness(db.sql, sandbox, {
      projectId: 'proj-throw-submit',
      wrap: (depot): BuildService => ({
        findByRequestKey: (r, o) => depot.findByRequestKey(r, o),
        status: (b, o) => depot.status(b, o),
        readLogs: (b, c, o) => depot.readLogs(b, c, o),
        cancel: (b, r, o) => depot.cancel(b, r, o),
        async submit(request, options) {
          const accepted = await depot.submit(request, options);
          if (throwAfterSubmit) {
            throwAfterSubmit = false;
            throw new Error('connection reset after the provider accepted the build');
          }
          return accepted;
        },
      }),
    });
    const { id } = await h.enqueueBuild({ serviceId: 'svc-throw-submit', branch: 'main', commitSha: SHA });
    expect(await h.tick()).toMatchObject({ retried: 1 });
    expect(await h.tick(2000)).toMatchObject({ continued: 1 }); // the retry (after ≤ 2 s of backoff) adopts
    const done = await drive(h, id);
    expect(done.status).toBe('done');
    expect(depotCalls(sandbox, 'CreateBuild', { projectId: 'proj-throw-submit' })).toHaveLength(1);
    await expectArchiveExact(h, done, 3);
  });
});

describe('cancelling a build job', () => {
  it('cancels the build at the provider (FinishBuild with an error) and ends the job cancelled', async () => {
    await scriptBuild(sandbox, { serviceId: 'svc-cancel', outcome: 'hang', polls: 5, lines: 10 });
    const h = buildHarness(db.sql, sandbox, { projectId: 'proj-cancel' });
    const { id } = await h.enqueueBuild({ serviceId: 'svc-cancel', branch: 'main', commitSha: SHA });
    await h.tick();
    await h.tick(2000);
    await cancelJob(db.sql, id, 'superseded by a newer push', { now: h.now() });
    expect(await h.tick()).toMatchObject({ cancelled: 1 });

    const job = await jobOf(id);
    expect(job.status).toBe('cancelled');
    const depotBuildId = job.checkpoint.depot_build_id as string;
    const finish = depotCalls(sandbox, 'FinishBuild', { buildId: depotBuildId });
    expect(finish).toHaveLength(1);
    expect(finish[0]!.body).toEqual({ buildId: depotBuildId, error: { error: `build job ${id} cancelled: superseded by a newer push` } });
    expect(await h.depot.status(depotBuildId)).toEqual({ state: 'cancelled' });
    expect((await desiredImage('svc-cancel'))).toBeNull();
  });

  it('a cancel that lands in the submit window still finds and cancels the build by its request key', async () => {
    await scriptBuild(sandbox, { serviceId: 'svc-cancel-window', outcome: 'hang', polls: 5, lines: 4 });
    const h = buildHarness(db.sql, sandbox, { projectId: 'proj-cancel-window' });
    const { id } = await h.enqueueBuild({ serviceId: 'svc-cancel-window', branch: 'main', commitSha: SHA });
    await h.crashStep(); // CreateBuild answered; the build id never reached the checkpoint
    await cancelJob(db.sql, id, 'operator', { now: h.now() });
    expect(await h.tick(LEASE + 1)).toMatchObject({ cancelled: 1 });

    const [created] = depotCalls(sandbox, 'CreateBuild', { projectId: 'proj-cancel-window' });
    expect(created).toBeDefined();
    const builds = (await h.depot.findByRequestKey({ serviceId: 'svc-cancel-window', branch: 'main', commitSha: SHA, requestKey: `starbase-build-${id}` }))!;
    expect(depotCalls(sandbox, 'FinishBuild', { buildId: builds.buildId })).toHaveLength(1);
    expect(await h.depot.status(builds.buildId)).toEqual({ state: 'cancelled' });
    expect(depotCalls(sandbox, 'CreateBuild', { projectId: 'proj-cancel-window' })).toHaveLength(1);
    expect((await jobOf(id)).status).toBe('cancelled');
  });

  it('a build job cancelled before it started calls no provider', async () => {
    const h = buildHarness(db.sql, sandbox, { projectId: 'proj-cancel-early' });
    const { id } = await h.enqueueBuild({ serviceId: 'svc-cancel-early', branch: 'main', commitSha: SHA });
    expect((await cancelJob(db.sql, id, 'never mind', { now: h.now() })).status).toBe('cancelled');
    expect(await h.tick()).toMatchObject({ claimed: 0 });
    expect(depotCalls(sandbox, 'CreateBuild', { projectId: 'proj-cancel-early' })).toHaveLength(0);
  });
});

async function desiredImage(serviceId: string): Promise<unknown> {
  const [row] = await db.sql`select desired_state->'image' as image from platform.services where id = ${serviceId}`;
  return row?.image ?? null;
}
