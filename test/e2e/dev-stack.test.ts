import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../scripts/embedded-postgres.ts';
import { createTestDatabase } from '../support/db.ts';

/**
 * Boots the `npm start` stack (migrations, sandbox, wrangler dev, cron driver) on a test database
 * and drives it over HTTP only.
 */
let baseUrl = '';
let token = '';
let output = '';
let exited: Promise<number | null>;
let child: ReturnType<typeof spawn>;
const dataDir = mkdtempSync(join(tmpdir(), 'starbase-e2e-'));

beforeAll(async () => {
  const db = await createTestDatabase();
  const port = await freePort();
  child = spawn(process.execPath, ['--import', 'tsx', 'scripts/dev.ts'], {
    env: { ...process.env, PORT: String(port), DATABASE_URL: db.url, STARBASE_DATA_DIR: dataDir },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)));
  const deadline = Date.now() + 120_000;
  while (!/starbase-worker is running/.test(output)) {
    if (Date.now() > deadline || child.exitCode !== null) throw new Error(`the dev stack did not start:\n${output}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  baseUrl = /API\s+(http:\/\/\S+)/.exec(output)![1]!;
  token = /dev token\s+(\S+)/.exec(output)![1]!;
}, 150_000);

afterAll(() => {
  if (child.exitCode === null) child.kill('SIGKILL');
  rmSync(dataDir, { recursive: true, force: true });
});

const api = (path: string, init: RequestInit = {}) =>
  fetch(`${baseUrl}${path}`, { ...init, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...init.headers } });

describe('npm start', () => {
  it('prints the URL, a dev token and a curl line', () => {
    expect(output).toContain('curl -s -X POST');
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
    child.kill('SIGINT');
    expect(await exited).toBe(0);
    expect(output).toContain('stopping');
    const res = await fetch(`${baseUrl}/healthz`).catch(() => null);
    expect(res).toBeNull();
  });
});
