import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALERT_KINDS } from '../../functions/lib/alert-kinds.ts';
import { alertText, WebhookAlerts } from '../../functions/adapters/webhook-alerts.ts';
import { scrubText } from '../../functions/lib/redact.ts';
import { claimJobs, deliverPendingAlerts, enqueue, retryJob } from '../../queue/index.ts';
import { startSandbox, type SandboxHandle, type SandboxProvider } from '../../sandbox/server.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';

/**
 * A Slack incoming webhook at the network edge: POST /services/<team>/<bot>/<secret> with a JSON
 * `{text}` answers 200 "ok"; a body without text answers 400 "invalid_payload", an unknown hook
 * 404 "no_service". `/_sandbox/slack/outage` makes the next N posts answer 500.
 */
function slackWebhook(): SandboxProvider {
  let outage = 0;
  return {
    name: 'slack',
    handle(req) {
      if (!req.path.startsWith('/services/')) return undefined;
      if (req.method !== 'POST') return { status: 405, body: 'invalid_method' };
      if (req.path !== '/services/T000/B000/hook-secret-123') return { status: 404, body: 'no_service' };
      if (outage > 0) {
        outage--;
        return { status: 500, body: 'rollup_error' };
      }
      let body: unknown;
      try {
        body = JSON.parse(req.body);
      } catch {
        return { status: 400, body: 'invalid_payload' };
      }
      if (typeof (body as { text?: unknown }).text !== 'string') return { status: 400, body: 'invalid_payload' };
      return { status: 200, body: 'ok' };
    },
    control(path, req) {
      if (path === '/outage') outage = Number(req.query.get('times') ?? 1);
      return { status: 200, body: { outage } };
    },
    reset() {
      outage = 0;
    },
  };
}

let db: TestDatabase;
let sandbox: SandboxHandle;
let hookUrl: string;
beforeAll(async () => {
  db = await createTestDatabase();
  sandbox = await startSandbox({ providers: [slackWebhook()] });
  hookUrl = `${sandbox.url}/services/T000/B000/hook-secret-123`;
});
afterAll(() => sandbox.close());

async function poisonJob(error: string): Promise<string> {
  const { job } = await enqueue(db.sql, { type: 'fail', payload: {}, maxAttempts: 1, priority: 0 });
  const [claimed] = await claimJobs(db.sql, { workerId: 'w', limit: 1 });
  expect(claimed!.id).toBe(job.id);
  expect(await retryJob(db.sql, claimed!, error, 0)).toBe('failed');
  return job.id;
}

const posted = () => sandbox.calls('slack').map((c) => c.body as { text: string });

describe('WebhookAlerts', () => {
  it('posts each open alert once as Slack JSON, scrubbed of secrets, with a link to the job', async () => {
    const jobId = await poisonJob('upstream refused token sk_live_canary_9f8e7d');
    const alerts = new WebhookAlerts({
      url: hookUrl,
      scrub: (text) => scrubText(text, ['sk_live_canary_9f8e7d']),
      jobLinkBase: 'https://worker.example.com/dashboard/jobs/',
    });
    expect(await deliverPendingAlerts(db.sql, alerts)).toBe(1);
    expect(await deliverPendingAlerts(db.sql, alerts)).toBe(0); // notified: not sent again next minute
    const bodies = posted();
    expect(bodies).toHaveLength(1);
    expect(bodies[0]!.text).toContain('*Poison job* [warning] (poison_job');
    expect(bodies[0]!.text).toContain(`job ${jobId} (fail) failed after 1 attempts: upstream refused token [redacted]`);
    expect(bodies[0]!.text).toContain(`<https://worker.example.com/dashboard/jobs/${jobId}|open job ${jobId}>`);
    expect(JSON.stringify(bodies)).not.toContain('sk_live_canary_9f8e7d');
    expect(sandbox.calls('slack')[0]).toMatchObject({ method: 'POST', headers: { 'content-type': 'application/json' } });
  });

  it('keeps an alert pending while the webhook fails, and sends it on the next pass; the error never shows the URL', async () => {
    sandbox.reset();
    await poisonJob('first failure');
    await fetch(`${sandbox.url}/_sandbox/slack/outage?times=1`, { method: 'POST' });
    const alerts = new WebhookAlerts({ url: hookUrl });
    const error = await deliverPendingAlerts(db.sql, alerts).catch((e: Error) => e);
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toBe('alert webhook answered 500: rollup_error');
    expect((error as Error).message).not.toContain('hook-secret-123');
    const [pending] = await db.sql`select count(*)::int as n from worker.alerts where notified_at is null and resolved_at is null`;
    expect(pending!.n).toBe(1);
    expect(await deliverPendingAlerts(db.sql, alerts)).toBe(1);
    // the refused post and the one that went through
    expect(posted().map((b) => b.text).filter((t) => t.includes('first failure'))).toHaveLength(2);
    expect(await deliverPendingAlerts(db.sql, alerts)).toBe(0);
  });

  it('reports an unreachable webhook and a wrong hook clearly', async () => {
    const dead = new WebhookAlerts({ url: 'http://127.0.0.1:1/services/x', timeoutMs: 2000 });
    const alert = { id: 1, kind: 'stuck_job', key: 'k', severity: 'warning' as const, jobId: null, message: 'm', detail: {}, openedAt: new Date('2026-11-01T00:00:00Z') };
    await expect(dead.send(alert)).rejects.toThrow(/^alert webhook unreachable: /);
    await expect(new WebhookAlerts({ url: `${sandbox.url}/services/T000/B000/wrong` }).send(alert)).rejects.toThrow('alert webhook answered 404: no_service');
    expect(() => new WebhookAlerts({ url: 'hooks.slack.com/services/x' })).toThrow(/http\(s\) URL/);
  });

  it('escapes Slack control characters and names each kind', () => {
    const text = alertText({ id: 2, kind: 'leader_churn', key: 'default', severity: 'warning', jobId: null, message: 'a <b> & c', detail: {}, openedAt: new Date('2026-11-01T00:00:00Z') });
    expect(text).toBe(':warning: *Leader churn* [warning] (leader_churn default)\na &lt;b&gt; &amp; c\nopened 2026-11-01T00:00:00.000Z');
    const critical = alertText({ id: 3, kind: 'deadline_missed', key: 'j1', severity: 'critical', jobId: 'j1', message: 'late', detail: {}, openedAt: new Date('2026-11-01T00:00:00Z') });
    expect(critical.split('\n')[0]).toBe(':rotating_light: *Job past its deadline* [critical] (deadline_missed j1)');
  });
});

describe('the alert kinds', () => {
  const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');

  it('docs/operations.md has one row per kind the Worker raises, and the README names each', () => {
    const ops = read('docs/operations.md');
    const table = ops.slice(ops.indexOf('| kind | opened when | resolved when |'));
    const rows = [...table.slice(0, table.indexOf('\n\n')).matchAll(/^\| `([a-z_]+)` \|/gm)].map((m) => m[1]);
    expect(rows.sort()).toEqual([...ALERT_KINDS].sort());
    const readme = read('docs/operations.md');
    for (const kind of ALERT_KINDS) expect(readme, kind).toContain(`\`${kind}\``);
  });

  it('each kind has its own title in a webhook message', () => {
    const titles = ALERT_KINDS.map((kind) => alertText({ id: 1, kind, key: 'k', severity: 'warning', jobId: null, message: 'm', detail: {}, openedAt: new Date(0) }).split('\n')[0]);
    expect(new Set(titles).size).toBe(ALERT_KINDS.length);
    for (const [i, kind] of ALERT_KINDS.entries()) expect(titles[i]).not.toContain(`*${kind}*`);
  });
});
