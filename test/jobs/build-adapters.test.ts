import { beforeAll, describe, expect, it } from 'vitest';
import { DepotBuildService, depotError } from '../../functions/platform/build/adapters/depot.ts';
import { PermanentError } from '../../queue/errors.ts';
import type { SandboxHandle } from '../../sandbox/server.ts';
import { depotCalls, sandboxControl, scriptBuild } from '../support/build-fakes.ts';
import { createTestSandbox } from '../support/sandbox.ts';

let sandbox: SandboxHandle;
beforeAll(async () => {
  sandbox = await createTestSandbox();
});

const request = (requestKey: string) => ({ serviceId: 'svc-adapter', branch: 'feature/ünïcode', commitSha: 'abcdef1', requestKey });
const depot = (overrides: Partial<ConstructorParameters<typeof DepotBuildService>[0]> = {}) =>
  new DepotBuildService({ baseUrl: sandbox.url, token: 'tok', projectId: 'proj-adapter', ...overrides });

describe('Depot adapter', () => {
  it('speaks Connect JSON: path, headers, real field names; finds a build by its request key', async () => {
    const d = depot();
    const { buildId } = await d.submit(request('key-1'));
    expect(await d.findByRequestKey(request('key-1'))).toEqual({ buildId });
    expect(await d.findByRequestKey(request('key-unknown'))).toBeNull();
    const [create] = depotCalls(sandbox, 'CreateBuild', { projectId: 'proj-adapter' });
    expect(create).toMatchObject({ method: 'POST', path: '/depot.build.v1.BuildService/CreateBuild', body: { projectId: 'proj-adapter' } });
    expect(create!.headers).toMatchObject({ 'content-type': 'application/json', 'connect-protocol-version': '1', 'idempotency-key': 'key-1' });
    const builds = (await sandboxControl(sandbox, 'GET', '/builds')) as { builds: { buildId: string; branch: string }[] };
    expect(builds.builds.find((b) => b.buildId === buildId)!.branch).toBe('feature/ünïcode');
    expect(depotCalls(sandbox, 'ListBuilds')[0]).toMatchObject({ path: '/depot.core.v1.BuildService/ListBuilds', body: { projectId: 'proj-adapter', pageSize: 100 } });
  });

  it('reads a running build’s log in step order, holding back lines of a step after one still open', async () => {
    await scriptBuild(sandbox, { serviceId: 'svc-adapter', commitSha: 'abcdef1', outcome: 'succeed', polls: 3, lines: 8, steps: 2, linesPerPoll: 3 });
    const d = depot();
    const { buildId } = await d.submit(request('key-logs'));
    expect(await d.status(buildId)).toEqual({ state: 'running' }); // 3 lines of step 1 (lines 1–4)
    const first = await d.readLogs(buildId, null);
    expect(first.lines.map((l) => l.seq)).toEqual([1, 2, 3]);
    expect(first.more).toBe(false);
    expect(first.lines[0]!.text).toBe('svc-adapter@abcdef1 #1/8: step output 1');
    expect(await d.readLogs(buildId, first.cursor)).toEqual({ lines: [], cursor: first.cursor, more: false });
    await d.status(buildId); // 6 lines: step 1 ended, step 2 has lines 5–6
    const second = await d.readLogs(buildId, first.cursor);
    expect(second.lines.map((l) => l.seq)).toEqual([4, 5, 6]);
    expect((await d.readLogs(buildId, first.cursor)).lines).toEqual(second.lines); // re-reading is stable
    await d.status(buildId);
    expect(await d.status(buildId)).toEqual({ state: 'succeeded', imageRef: `registry.depot.dev/proj-adapter:${buildId}` });
    const last = await d.readLogs(buildId, second.cursor, { final: true });
    expect(last.lines.map((l) => l.seq)).toEqual([7, 8]);
  });

  it('reports a failed build with the failing step’s name and error', async () => {
    await scriptBuild(sandbox, { serviceId: 'svc-adapter', commitSha: 'abcdef1', outcome: 'fail', polls: 0, lines: 2, error: 'exit code: 2' });
    const d = depot();
    const { buildId } = await d.submit(request('key-fail'));
    expect(await d.status(buildId)).toEqual({ state: 'failed', error: '[2/2] RUN ./build.sh stage-2: exit code: 2' });
    await d.cancel(buildId, 'too late'); // finishing a finished build is not an error
  });

  it('maps errors: 4xx that cannot succeed are permanent, 5xx, 429 and network failures are retried', async () => {
    await expect(depot({ token: '' }).status('sbx-none')).rejects.toSatisfy((e) => e instanceof PermanentError && /401 unauthenticated/.test((e as Error).message));
    await expect(depot().status('sbx-none')).rejects.toBeInstanceOf(PermanentError); // 404 not_found
    await sandboxControl(sandbox, 'POST', '/faults', { method: 'GetBuild', status: 503, code: 'unavailable' });
    await expect(depot().status('sbx-none')).rejects.toSatisfy((e) => !(e instanceof PermanentError) && /503 unavailable/.test((e as Error).message));
    await sandboxControl(sandbox, 'POST', '/faults', { method: 'CreateBuild', status: 429, code: 'resource_exhausted' });
    await expect(depot().submit(request('k'))).rejects.toSatisfy((e) => !(e instanceof PermanentError));
    await expect(depot({ baseUrl: 'http://127.0.0.1:1' }).status('x')).rejects.toSatisfy((e) => !(e instanceof PermanentError) && !/tok/.test((e as Error).message));
    expect(depotError('r', 400, { code: 'invalid_argument', message: 'bad' })).toBeInstanceOf(PermanentError);
    expect(depotError('r', 409, { code: 'aborted' })).not.toBeInstanceOf(PermanentError);
    expect(depotError('r', 408, null)).not.toBeInstanceOf(PermanentError);
    expect(depotError('r', 502, '<html>')).not.toBeInstanceOf(PermanentError);
  });
});
