import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { startDevStack, type DevStack } from '../support/dev-stack.ts';

/**
 * Boots the `npm start` stack (migrations, sandbox, wrangler dev, cron driver) on a test database
 * and drives it over HTTP only.
 */
let stack: DevStack;
let baseUrl = '';
let token = '';
let dataDir = '';
let startedAt = 0;
/** A secret of the deployment, passed to the Worker like every other dev secret. */
const ENV_CANARY = `canary-env-${crypto.randomUUID()}`;
/** A credential no scrubber can know (a provider's error echoing a password it generated), in a step's error. */
const STEP_CANARY = `canary-step-${crypto.randomUUID()}`;
beforeAll(async () => {
  startedAt = Date.now();
  stack = await startDevStack({ env: { STARBASE_DEV_VARS: JSON.stringify({ CANARY_API_TOKEN: ENV_CANARY }) } });
  ({ baseUrl, token } = stack);
  // the stack's STARBASE_DATA_DIR, from its own environment
  const environ = readFileSync(`/proc/${stack.child.pid}/environ`, 'utf8').split('\0');
  dataDir = environ.find((e) => e.startsWith('STARBASE_DATA_DIR='))!.slice('STARBASE_DATA_DIR='.length);
}, 150_000);

/** The processes below the dev script (wrangler, workerd, …), by walking /proc's parent links. */
function descendants(root: number): number[] {
  const parent = new Map<number, number>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      parent.set(Number(name), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // gone meanwhile
    }
  }
  const out: number[] = [];
  const walk = (pid: number) => {
    for (const [child, ppid] of parent) if (ppid === pid) (out.push(child), walk(child));
  };
  walk(root);
  return out;
}

/** Every file under a directory (none when it does not exist). */
function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name));
}

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

  it('passes no secret on a command line: none is in the argv of wrangler, workerd or any process below the stack', () => {
    const secrets = [token, ENV_CANARY, 'sandbox-do-token', 'sandbox-depot-token', 'sk_test_sandbox', 'whsec_sandbox_dev'];
    for (const file of ['encryption-keys', 'session-secret']) {
      if (existsSync(join(dataDir, file))) secrets.push(readFileSync(join(dataDir, file), 'utf8').trim());
    }
    const below = descendants(stack.child.pid!);
    const commandLines = below.map((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
      } catch {
        return '';
      }
    });
    expect(commandLines.some((line) => line.includes('wrangler.js dev'))).toBe(true);
    expect(commandLines.some((line) => /workerd/.test(line))).toBe(true);
    for (const secret of secrets) {
      expect(commandLines.filter((line) => line.includes(secret)), secret.slice(0, 12)).toEqual([]);
    }
  });

  it('keeps its secrets in files only its user can read (0600): the stack file, the vars file, the dev secrets', () => {
    for (const file of ['dev-stack.json', 'dev.vars', 'dev-token', 'encryption-keys', 'session-secret']) {
      const path = join(dataDir, file);
      expect(existsSync(path), file).toBe(true);
      expect((statSync(path).mode & 0o777).toString(8), file).toBe('600');
    }
    expect(readFileSync(join(dataDir, 'dev-stack.json'), 'utf8')).toContain(token);
    expect(readFileSync(join(dataDir, 'dev.vars'), 'utf8')).toContain(`CANARY_API_TOKEN='${ENV_CANARY}'`);
  });

  it("writes no secret to wrangler's log files after running a job whose error quotes them", async () => {
    const res = await api('/v1/jobs', {
      method: 'POST',
      body: JSON.stringify({ type: 'fail', payload: { message: `provider refused: password=${STEP_CANARY} token=${ENV_CANARY}` }, maxAttempts: 1 }),
    });
    expect(res.status).toBe(201);
    const { job } = (await res.json()) as { job: { id: string } };
    let seen: { status: string; lastError: string | null } | undefined;
    for (let i = 0; i < 200 && seen?.status !== 'failed'; i++) {
      seen = ((await (await api(`/v1/jobs/${job.id}`)).json()) as { job: { status: string; lastError: string | null } }).job;
      if (seen.status !== 'failed') await new Promise((r) => setTimeout(r, 50));
    }
    expect(seen?.status).toBe('failed');
    expect(seen?.lastError).toContain(STEP_CANARY); // the step ran and said it; the Worker logged its step line
    // wrangler's log directories (its default, or WRANGLER_LOG_PATH) and the stack's data directory
    const config = process.env.XDG_CONFIG_HOME ?? join(homedir(), '.config');
    const dirs = [process.env.WRANGLER_LOG_PATH, join(config, '.wrangler', 'logs'), join(homedir(), '.wrangler', 'logs'), dataDir].filter(Boolean) as string[];
    const logs = dirs.flatMap(filesUnder).filter((file) => file.endsWith('.log') && statSync(file).mtimeMs >= startedAt - 1000);
    for (const file of logs) {
      const text = readFileSync(file, 'utf8');
      expect(text.includes(STEP_CANARY), file).toBe(false);
      expect(text.includes(ENV_CANARY), file).toBe(false);
      expect(text.includes(token), file).toBe(false);
    }
  });

  it('stops everything on Ctrl-C, leaving no process behind', async () => {
    expect(await stack.stop()).toBe(0);
    expect(stack.output()).toContain('stopping');
    const res = await fetch(`${baseUrl}/healthz`).catch(() => null);
    expect(res).toBeNull();
    // the vars file and the stack file go with it
    expect(existsSync(join(dataDir, 'dev.vars'))).toBe(false);
    expect(existsSync(join(dataDir, 'dev-stack.json'))).toBe(false);
  });
});
