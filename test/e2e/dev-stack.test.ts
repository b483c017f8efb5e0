import { beforeAll, describe, expect, it } from 'vitest';
import { startDevStack, type DevStack } from '../support/dev-stack.ts';

/**
 * Boots the `npm start` stack (migrations, sandbox, wrangler dev, cron driver) on a test database
 * and drives it over HTTP only.
 */
let stack: DevStack;
let baseUrl = '';
let token = '';
beforeAll(async () => {
  stack = await startDevStack();
  ({ baseUrl, token } = stack);
}, 150_000);

const api = (path: string, init: RequestInit = {}) => stack.api(path, init);

describe('npm start', () => {
  it('prints the URL, a dev token and a curl line', () => {
    expect(stack.output()).toContain('curl -s -X POST');
    expect(token).toMatch(/^dev_/);
  });

  it('runs an enqueued job to done within a second, without waiting for a tick', async () => {
    const started = Date.now();
    const res = await api('/v1/jobs', { method: 'POST', body: JSON.stringify({ type: 'uppercase', payload: { text: 'hi' } }) });
    expect(res.status).toBe(201);
    const { job } = (await res.json()) as { job: { id: string } };
    let seen: { status: string; result: unknown } | undefined;
    while (Date.now() - started < 1000) {
      seen = ((await (await api(`/v1/jobs/${job.id}`)).json()) as { job: { status: string; result: unknown } }).job;
      if (seen.status === 'done') break;
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(seen).toMatchObject({ status: 'done', result: { text: 'HI' } });
  });

  it('refuses requests without the token and answers health without one', async () => {
    expect((await fetch(`${baseUrl}/v1/jobs`)).status).toBe(401);
    expect((await fetch(`${baseUrl}/healthz`)).status).toBe(200);
  });

  it('fires a cron through the scheduled handler', async () => {
    const res = await fetch(`${baseUrl}/__scheduled?cron=${encodeURIComponent('0 0 1 * *')}`);
    expect(res.status).toBe(200);
    const list = (await (await api('/v1/jobs?type=billing_cron')).json()) as { jobs: Array<{ submitKey: string }> };
    expect(list.jobs.length).toBe(1);
    expect(list.jobs[0]!.submitKey).toMatch(/^billing_cron:\d{4}-\d{2}$/);
  });

  it('stops everything on Ctrl-C, leaving no process behind', async () => {
    expect(await stack.stop()).toBe(0);
    expect(stack.output()).toContain('stopping');
    const res = await fetch(`${baseUrl}/healthz`).catch(() => null);
    expect(res).toBeNull();
  });
});
