import { env } from 'cloudflare:test';
import { beforeAll, describe, expect, it } from 'vitest';
import { readConfig, type WorkerEnv } from '../../functions/config.ts';
import { SpacesClient } from '../../functions/adapters/spaces-client.ts';
import { SpacesLogArchive } from '../../functions/platform/build/adapters/spaces-log-archive.ts';
import { InvocationUsage, installFetchCounting, withUsage } from '../../functions/usage.ts';
import { sandboxSpaces, sandboxSpacesVars, spacesObjects } from '../support/spaces.ts';
import { createWorkerHarness, requestThrough, testEnv, type WorkerHarness } from './support.ts';

/**
 * LOG_ARCHIVE = "spaces" inside workerd: a build runs end to end on ticks, its log lines are
 * archived to the sandbox's Spaces over SigV4-signed fetches, and the logs route reads it back
 * from there (the R2 binding stays empty).
 */

const sandbox = testEnv.TEST_SANDBOX_URL;
const spaces = sandboxSpaces(sandbox);
let h: WorkerHarness;

beforeAll(async () => {
  h = await createWorkerHarness({
    ...sandboxSpacesVars(spaces),
    DEPOT_API_URL: sandbox,
    DEPOT_TOKEN: 'sandbox-depot-token',
    DEPOT_PROJECT_ID: 'starbase-spaces-test',
    BUILD_POLL_INTERVAL_MS: '0',
    TICK_BUDGET_MS: '3000',
    KICK_BUDGET_MS: '1000',
  } as never);
});

describe('build logs in Spaces', () => {
  it('a build archives its log to one Spaces object, and GET /v1/builds/:id/logs reads it from there', async () => {
    const svc = `svc-${crypto.randomUUID().slice(0, 8)}`;
    await h.sql`insert into platform.accounts (id) values ('acct-spaces') on conflict do nothing`;
    await h.sql`insert into platform.services (id, account_id) values (${svc}, 'acct-spaces')`;
    const scripted = await fetch(`${sandbox}/_sandbox/depot/script`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ serviceId: svc, outcome: 'succeed', polls: 3, lines: 11 }),
    });
    expect(scripted.status).toBe(200);
    const pushed = await h.request('/v1/pushes', { method: 'POST', token: 'enqueue', json: { accountId: 'acct-spaces', serviceId: svc, branch: 'main', commitSha: 'abc1234' } });
    expect(pushed.status).toBe(201);
    const { job } = (await pushed.json()) as { job: { id: string } };
    await h.sql`update worker.jobs set run_at = now() where id = ${job.id}`;
    await h.trigger('* * * * *');
    const [row] = await h.sql`select status, last_error, checkpoint from worker.jobs where id = ${job.id}`;
    expect(row, String(row?.last_error)).toMatchObject({ status: 'done' });

    const builds = (await (await fetch(`${sandbox}/_sandbox/depot/builds`)).json()) as { builds: { buildId: string; serviceId: string }[] };
    const depotBuild = builds.builds.find((b) => b.serviceId === svc)!;
    const expected = await (await fetch(`${sandbox}/_sandbox/depot/builds/${depotBuild.buildId}/log`)).text();
    expect(expected.split('\n')).toHaveLength(12);
    const objects = (await spacesObjects(sandbox, spaces.bucket)).filter((o) => o.key.startsWith('builds/'));
    expect(objects.map((o) => [o.key, o.body, o.metadata.lastseq])).toEqual([[`builds/${job.id}.log`, expected, '11']]);
    expect(await (env as unknown as { BUILD_LOGS: R2Bucket }).BUILD_LOGS.get(`builds/${job.id}.log`)).toBeNull();

    const logs = await h.request(`/v1/builds/${job.id}/logs`, { token: 'enqueue' });
    expect(logs.status).toBe(200);
    expect(logs.headers.get('x-build-last-line')).toBe('11');
    expect(await logs.text()).toBe(expected);
  });

  it('each S3 call is one fetch subrequest: an append with new lines is a GetObject and a PutObject', async () => {
    installFetchCounting();
    const archive = new SpacesLogArchive(new SpacesClient(spaces));
    const buildId = `usage-${crypto.randomUUID()}`;
    await archive.append(`warm-${buildId}`, [{ seq: 1, text: 'the write check runs once per isolate and bucket' }]);
    const usage = new InvocationUsage({ cpuMs: 25_000, subrequests: 9_000, connections: 6 });
    await withUsage(usage, async () => {
      await archive.append(buildId, [{ seq: 1, text: 'line 1' }]); // get (404), put
      await archive.append(buildId, [{ seq: 1, text: 'line 1' }, { seq: 2, text: 'line 2' }]); // get, put
      await archive.append(buildId, [{ seq: 2, text: 'line 2' }]); // get: nothing new
      await archive.read(buildId); // get
    });
    expect(usage.snapshot()).toMatchObject({ subrequests: 6, byKind: { fetch: 6, r2: 0 }, openConnections: 0 });
  });

  it('LOG_ARCHIVE = "spaces" with a setting missing refuses the request, naming the variable', async () => {
    const { SPACES_BUCKET: _bucket, ...rest } = sandboxSpacesVars(spaces);
    const missing = { ...testEnv, ...rest } as WorkerEnv;
    expect(() => readConfig(missing)).toThrow(/LOG_ARCHIVE is "spaces" but SPACES_BUCKET is not set/);
    expect(() => readConfig({ ...testEnv, LOG_ARCHIVE: 's3' } as WorkerEnv)).toThrow('LOG_ARCHIVE must be "r2" or "spaces", got "s3"');
    expect(() => readConfig({ ...testEnv, ...sandboxSpacesVars(spaces), SPACES_ENDPOINT: 'nyc3.digitaloceanspaces.com' } as WorkerEnv)).toThrow(/SPACES_ENDPOINT must be an http\(s\) URL/);
    const refused = await requestThrough(missing, '/v1/jobs');
    expect(refused.status).toBe(503);
    expect(await refused.text()).toContain('SPACES_BUCKET');
    expect(readConfig({ ...testEnv } as WorkerEnv).platform.logStore).toEqual({ store: 'r2' });
  });
});
