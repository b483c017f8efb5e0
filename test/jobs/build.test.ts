import { beforeAll, describe, expect, it } from 'vitest';
import { enqueue, getJob, JobRegistry } from '../../queue/index.ts';
import type { SandboxHandle } from '../../sandbox/server.ts';
import { buildHarness, depotCalls, sandboxControl, sandboxLog, scriptBuild } from '../support/build-fakes.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { createTestSandbox } from '../support/sandbox.ts';
import { seedAccount, seedService, TEST_ACCOUNT } from '../support/tenancy.ts';

let db: TestDatabase;
let sandbox: SandboxHandle;
beforeAll(async () => {
  db = await createTestDatabase();
  sandbox = await createTestSandbox();
});

const SHA = 'a1b2c3d4e5f60718293a4b5c6d7e8f9012345678';

async function desiredState(serviceId: string) {
  const [row] = await db.sql`select desired_state, updated_at from platform.services where id = ${serviceId}`;
  return row ?? null;
}

describe('build job', () => {
  it('happy path, driven by ticks: submit → poll × n → finish; archive, relay and desired state', async () => {
    await scriptBuild(sandbox, { serviceId: 'svc-happy', outcome: 'succeed', polls: 3, lines: 10 });
    const h = buildHarness(db.sql, sandbox, { projectId: 'proj-happy' });
    const job = await h.enqueueBuild({ serviceId: 'svc-happy', branch: 'main', commitSha: SHA });

    expect(await h.tick()).toMatchObject({ claimed: 1, continued: 1 }); // submit
    const submitted = (await getJob(db.sql, job.id))!.job;
    expect(submitted).toMatchObject({ status: 'queued', step: 'poll', attempts: 0 });
    const depotBuildId = submitted.checkpoint.depot_build_id as string;
    expect(depotBuildId).toMatch(/^sbx/);
    expect(submitted.checkpoint.request_key).toBe(`starbase-build-${job.id}`);

    expect(await h.tick(1999)).toMatchObject({ claimed: 0 }); // the poll interval is honoured
    for (let poll = 1; poll <= 3; poll++) {
      expect(await h.tick(1)).toMatchObject({ claimed: 1, continued: 1 });
      expect((await h.archive.read(job.id))?.lastSeq).toBe(poll * 3); // archived as they arrive
      await h.tick(1999);
    }
    expect(await h.tick(1)).toMatchObject({ claimed: 2, continued: 1, done: 1 }); // last poll, then finish at once

    const after = await getJob(db.sql, job.id);
    expect(after!.job.status).toBe('done');
    const steps = after!.events.filter((e) => e.kind === 'checkpoint').map((e) => e.detail.step);
    expect(steps).toEqual(['poll', 'poll', 'poll', 'poll', 'finish']);
    const image = { ref: `registry.depot.dev/proj-happy:${depotBuildId}`, commitSha: SHA, branch: 'main', buildId: job.id, depotBuildId, builtAt: h.now().toISOString() };
    expect(after!.job.result).toEqual({ serviceId: 'svc-happy', image });
    expect((await desiredState('svc-happy'))!.desired_state).toEqual({ image });

    const archived = await h.archive.read(job.id);
    expect(archived).toEqual({ text: await sandboxLog(sandbox, depotBuildId), lastSeq: 10 });
    expect(h.bucket.objects.size).toBe(1);
    expect([...h.bucket.objects.keys()]).toEqual([`builds/${job.id}.log`]);
    expect(h.relay.linesOf(job.id).map((l) => l.seq)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(h.relay.linesOf(job.id).map((l) => `${l.text}\n`).join('')).toBe(archived!.text);

    expect(depotCalls(sandbox, 'CreateBuild', { projectId: 'proj-happy' })).toHaveLength(1);
    const create = depotCalls(sandbox, 'CreateBuild', { projectId: 'proj-happy' })[0]!;
    expect(create.headers).toMatchObject({ 'content-type': 'application/json', 'connect-protocol-version': '1', 'idempotency-key': `starbase-build-${job.id}` });
    expect(JSON.stringify(sandbox.calls('depot'))).not.toContain('sandbox-token');
    expect(depotCalls(sandbox, 'GetBuild', { buildId: depotBuildId })).toHaveLength(4);
  });

  it('merges the image into an existing service row, keeping its other desired state', async () => {
    await db.sql`insert into platform.services (id, account_id, desired_state) values ('svc-merge', 'acct-test', ${db.sql.json({ env: { A: '1' }, image: { ref: 'old' } })})`;
    await scriptBuild(sandbox, { serviceId: 'svc-merge', outcome: 'succeed', polls: 0, lines: 2 });
    const h = buildHarness(db.sql, sandbox, { projectId: 'proj-merge' });
    const job = await h.enqueueBuild({ serviceId: 'svc-merge', branch: 'main', commitSha: SHA });
    await h.tick();
    expect(await h.tick(2000)).toMatchObject({ done: 1 });
    const row = await desiredState('svc-merge');
    expect(row!.desired_state.env).toEqual({ A: '1' });
    expect(row!.desired_state.image).toMatchObject({ buildId: job.id, commitSha: SHA });
    expect(row!.updated_at.toISOString()).toBe(h.now().toISOString());
  });

  it('a failed build fails the job with the build error, archives the whole log, and leaves desired state alone', async () => {
    await db.sql`insert into platform.services (id, account_id, desired_state) values ('svc-fail', 'acct-test', ${db.sql.json({ image: { ref: 'registry/previous:1' } })})`;
    await scriptBuild(sandbox, { serviceId: 'svc-fail', outcome: 'fail', polls: 1, lines: 7, error: 'npm ERR! missing script: build' });
    const h = buildHarness(db.sql, sandbox, { projectId: 'proj-fail' });
    const job = await h.enqueueBuild({ serviceId: 'svc-fail', branch: 'main', commitSha: SHA });
    await h.tick();
    await h.tick(2000);
    expect(await h.tick(2000)).toMatchObject({ failed: 1 });

    const after = (await getJob(db.sql, job.id))!.job;
    expect(after.status).toBe('failed');
    expect(after.lastError).toMatch(/failed: .*npm ERR! missing script: build/);
    expect(after.attempts).toBe(1); // permanent: no retries
    expect((await desiredState('svc-fail'))!.desired_state).toEqual({ image: { ref: 'registry/previous:1' } });
    const depotBuildId = after.checkpoint.depot_build_id as string;
    expect((await h.archive.read(job.id))!.text).toBe(await sandboxLog(sandbox, depotBuildId));
    expect(depotCalls(sandbox, 'FinishBuild', { buildId: depotBuildId })).toHaveLength(0); // nothing to cancel
  });

  it('retries a provider outage mid-build and a relay outage costs no archived line', async () => {
    await scriptBuild(sandbox, { serviceId: 'svc-flaky', outcome: 'succeed', polls: 3, lines: 9 });
    const h = buildHarness(db.sql, sandbox, { projectId: 'proj-flaky' });
    const job = await h.enqueueBuild({ serviceId: 'svc-flaky', branch: 'main', commitSha: SHA });
    await h.tick();
    await h.tick(2000);
    await sandboxControl(sandbox, 'POST', '/faults', { method: 'GetBuildStepLogs', status: 503, code: 'unavailable', times: 1 });
    expect(await h.tick(2000)).toMatchObject({ retried: 1 });
    h.relay.failNext = 1;
    for (let i = 0; i < 6 && (await getJob(db.sql, job.id))!.job.status !== 'done'; i++) await h.tick(2000);

    const after = (await getJob(db.sql, job.id))!.job;
    expect(after.status).toBe('done');
    expect(after.checkpoint.relay_failures).toBe(1);
    const depotBuildId = after.checkpoint.depot_build_id as string;
    expect((await h.archive.read(job.id))!.text).toBe(await sandboxLog(sandbox, depotBuildId));
    expect(depotCalls(sandbox, 'CreateBuild', { projectId: 'proj-flaky' })).toHaveLength(1);
  });

  it('pages a long log: a terminal build with lines left is polled again at once until the archive is complete', async () => {
    await scriptBuild(sandbox, { serviceId: 'svc-long', outcome: 'succeed', polls: 0, lines: 23, steps: 4, logPageSize: 2 });
    const h = buildHarness(db.sql, sandbox, { projectId: 'proj-long', maxLinesPerRead: 5 });
    const job = await h.enqueueBuild({ serviceId: 'svc-long', branch: 'main', commitSha: SHA });
    await h.tick();
    expect(await h.tick(2000)).toMatchObject({ continued: 5, done: 1 }); // 5 reads of ≤ 5 lines, then finish
    const after = (await getJob(db.sql, job.id))!.job;
    expect(after.status).toBe('done');
    expect((await h.archive.read(job.id))).toEqual({ text: await sandboxLog(sandbox, after.checkpoint.depot_build_id as string), lastSeq: 23 });
    expect(h.relay.linesOf(job.id).map((l) => l.seq)).toEqual(Array.from({ length: 23 }, (_, i) => i + 1));
  });

  it('a hung build is cancelled at the provider and the job fails once the build timeout passes', async () => {
    await scriptBuild(sandbox, { serviceId: 'svc-hang', outcome: 'hang', polls: 3, lines: 4 });
    const h = buildHarness(db.sql, sandbox, { projectId: 'proj-hang', buildTimeoutMs: 10_000 });
    const job = await h.enqueueBuild({ serviceId: 'svc-hang', branch: 'main', commitSha: SHA });
    await h.tick();
    for (let i = 0; i < 5; i++) expect(await h.tick(2000)).toMatchObject({ continued: 1 });
    expect(await h.tick(2000)).toMatchObject({ failed: 1 }); // 12 s after submit
    const after = (await getJob(db.sql, job.id))!.job;
    expect(after.lastError).toMatch(/still running 10000 ms after submit/);
    const depotBuildId = after.checkpoint.depot_build_id as string;
    expect(depotCalls(sandbox, 'FinishBuild', { buildId: depotBuildId })).toHaveLength(1);
    expect((await h.archive.read(job.id))!.text).toBe(await sandboxLog(sandbox, depotBuildId));
  });

  it('is registered by its migration so plain SQL can enqueue a push, and the registry sync agrees with it', async () => {
    const [row] = await db.sql`select lease_ms, max_attempts, weight from worker.job_types where type = 'build'`;
    expect(row).toEqual({ lease_ms: 120_000, max_attempts: 8, weight: 'light' });
    const h = buildHarness(db.sql, sandbox, { projectId: 'proj-sql' });
    await new JobRegistry([h.type]).sync(db.sql);
    expect((await db.sql`select lease_ms, max_attempts, weight from worker.job_types where type = 'build'`)[0]).toEqual(row);

    await scriptBuild(sandbox, { serviceId: 'svc-sql', outcome: 'succeed', polls: 0, lines: 1 });
    // worker.enqueue_jobs, not worker.enqueue_job: the latter runs its insert once per column (see the report of issue 4).
    await seedService(db.sql, 'svc-sql');
    const push = { type: 'build', payload: { accountId: TEST_ACCOUNT, serviceId: 'svc-sql', branch: 'main', commitSha: SHA }, dedupeKey: 'deploy:svc-sql:main' };
    const [{ j: job }] = (await db.sql`select j from worker.enqueue_jobs(${db.sql.json([push])}::jsonb, ${h.now()}) j`) as unknown as [{ j: { id: string; max_attempts: number } }];
    expect(job.max_attempts).toBe(8);
    await h.tick();
    expect(await h.tick(2000)).toMatchObject({ done: 1 });
    expect((await desiredState('svc-sql'))!.desired_state.image.buildId).toBe(job.id);
  });

  it('rejects a malformed payload at once, naming the field, and calls no provider', async () => {
    const h = buildHarness(db.sql, sandbox, { projectId: 'proj-bad' });
    const job = await h.enqueueBuild({ serviceId: 'svc-bad', branch: 'main', commitSha: 'not-a-sha' });
    expect(await h.tick()).toMatchObject({ failed: 1 });
    expect((await getJob(db.sql, job.id))!.job.lastError).toMatch(/invalid payload: commitSha/);
    expect(depotCalls(sandbox, 'CreateBuild', { projectId: 'proj-bad' })).toHaveLength(0);
  });
});

describe('build job: the pushing account must own the service, in the steps themselves', () => {
  it('a build for another account\'s service, enqueued around the push route, fails permanently before Depot is called', async () => {
    await seedService(db.sql, 'svc-owned', 'acct-owner');
    await seedAccount(db.sql, 'acct-intruder');
    const h = buildHarness(db.sql, sandbox, { projectId: 'proj-foreign' });
    const foreign = (await enqueue(db.sql, { type: 'build', payload: { accountId: 'acct-intruder', serviceId: 'svc-owned', branch: 'main', commitSha: SHA } }, { now: h.now() })).job;
    const unknownAccount = (await enqueue(db.sql, { type: 'build', payload: { accountId: 'acct-nonexistent', serviceId: 'svc-owned', branch: 'main', commitSha: SHA } }, { now: h.now() })).job;
    const unknownService = (await enqueue(db.sql, { type: 'build', payload: { accountId: 'acct-owner', serviceId: 'svc-never-made', branch: 'main', commitSha: SHA } }, { now: h.now() })).job;
    expect(await h.tick()).toMatchObject({ failed: 3 });
    for (const [job, message] of [[foreign, 'service svc-owned does not belong to account acct-intruder'], [unknownAccount, 'no account acct-nonexistent'], [unknownService, 'no service svc-never-made']] as const) {
      const after = (await getJob(db.sql, job.id))!.job;
      expect(after).toMatchObject({ status: 'failed', attempts: 1 });
      expect(after.lastError).toBe(`build refused: ${message}`);
    }
    expect(depotCalls(sandbox, 'CreateBuild', { projectId: 'proj-foreign' })).toHaveLength(0);
    expect(await db.sql`select id from platform.services where id = 'svc-never-made'`).toEqual([]);
    expect((await desiredState('svc-owned'))!.desired_state).toEqual({});
  });

  it('a service deleted while it builds is not created again by the finish step', async () => {
    await scriptBuild(sandbox, { serviceId: 'svc-gone', outcome: 'succeed', polls: 0, lines: 1 });
    const h = buildHarness(db.sql, sandbox, { projectId: 'proj-gone' });
    const job = await h.enqueueBuild({ serviceId: 'svc-gone', branch: 'main', commitSha: SHA });
    await h.tick(); // submit
    await db.sql`delete from platform.services where id = 'svc-gone'`;
    await h.tick(2000); // poll (succeeded) → finish
    const after = (await getJob(db.sql, job.id))!.job;
    expect(after.status).toBe('failed');
    expect(after.lastError).toBe('build refused: no service svc-gone');
    expect(await desiredState('svc-gone')).toBeNull();
  });

  it('a service handed to another account while it builds does not get the image', async () => {
    await scriptBuild(sandbox, { serviceId: 'svc-moved', outcome: 'succeed', polls: 0, lines: 1 });
    const h = buildHarness(db.sql, sandbox, { projectId: 'proj-moved' });
    const job = await h.enqueueBuild({ serviceId: 'svc-moved', branch: 'main', commitSha: SHA });
    await h.tick();
    await seedAccount(db.sql, 'acct-new-owner');
    await db.sql`update platform.services set account_id = 'acct-new-owner' where id = 'svc-moved'`;
    await h.tick(2000);
    expect((await getJob(db.sql, job.id))!.job).toMatchObject({ status: 'failed', lastError: `build refused: service svc-moved does not belong to account ${TEST_ACCOUNT}` });
    expect((await desiredState('svc-moved'))!.desired_state).toEqual({});
  });
});
