import { beforeAll, describe, expect, it } from 'vitest';
import { startDevStack, type DevStack } from '../support/dev-stack.ts';
import { spacesObjects } from '../support/spaces.ts';

/**
 * `LOG_ARCHIVE=spaces npm start`: the stack points the Worker's log archive at the sandbox's
 * Spaces with its dev key pair — no account, no network — and a build's log lands there and is
 * read back through the logs route.
 */
let stack: DevStack;
let sandboxUrl = '';
beforeAll(async () => {
  stack = await startDevStack({ env: { LOG_ARCHIVE: 'spaces', STARBASE_DEV_VARS: JSON.stringify({ BUILD_POLL_INTERVAL_MS: '0' }) } });
  sandboxUrl = /sandbox\s+(http:\/\/\S+)/.exec(stack.output())![1]!;
}, 150_000);

describe('LOG_ARCHIVE=spaces npm start', () => {
  it('says where build logs go, archives a build’s log to the sandbox’s Spaces and serves it from there', async () => {
    expect(stack.output()).toContain("build logs  Spaces, the sandbox's bucket starbase-dev-build-logs");
    const pushed = await stack.api('/v1/pushes', { method: 'POST', body: JSON.stringify({ accountId: 'acct-demo', serviceId: 'svc-demo', branch: 'main', commitSha: 'abc1234' }) });
    expect(pushed.status).toBe(201);
    const { job } = (await pushed.json()) as { job: { id: string } };
    // a push runs after its 5 s debounce; then a poll every dispatch until the sandbox's build ends
    let status = '';
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      status = ((await (await stack.api(`/v1/jobs/${job.id}`)).json()) as { job: { status: string } }).job.status;
      if (status === 'done' || status === 'failed') break;
      await new Promise((r) => setTimeout(r, 250));
    }
    expect(status).toBe('done');
    const [object] = (await spacesObjects(sandboxUrl, 'starbase-dev-build-logs')).filter((o) => o.key === `builds/${job.id}.log`);
    expect(object!.body.length).toBeGreaterThan(0);
    const logs = await stack.api(`/v1/builds/${job.id}/logs`);
    expect(logs.status).toBe(200);
    expect(await logs.text()).toBe(object!.body);
  });
});
