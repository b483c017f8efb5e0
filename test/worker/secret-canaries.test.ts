import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { SECRET_NAMES, WORKER_SECRETS, type SecretName } from '../../functions/lib/worker-secrets.ts';
import readmeText from '../../docs/deploying.md?raw';
import wranglerText from '../../wrangler.toml?raw';
import { createWorkerHarness, testEnv as h0, type WorkerHarness } from './support.ts';

/**
 * Every secret the Worker declares (functions/lib/worker-secrets.ts) is set to a canary value,
 * each value is fed into the paths that write text somewhere — an error a step throws (stored as
 * last_error, in the job's events and the poison alert), log lines, alerts sent to the webhook,
 * a maintenance pass that fails, API answers, /metrics and the dashboard (its job, dead-letter,
 * bulk and flow-control pages) — and no canary may come out anywhere. The key ring's canary is
 * checked whole and key by key.
 */
const tail = () => crypto.randomUUID().replace(/-/g, '').slice(0, 16);
const ringKey = btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(32))));
const CANARIES: Record<SecretName, string> = {
  // the Worker's bearer tokens must be at least 32 characters (config.ts checkTokens)
  ADMIN_TOKEN: `canary-admin-${tail()}${tail()}`,
  SESSION_SECRET: `canary-session-${tail()}${tail()}`,
  ENQUEUE_TOKEN: `canary-enqueue-${tail()}${tail()}`,
  METRICS_TOKEN: `canary-metrics-${tail()}${tail()}`,
  ALERT_WEBHOOK_URL: `https://alerts.canary.test/hooks/${tail()}`,
  DEPOT_TOKEN: `canary-depot-${tail()}`,
  DEPOT_WEBHOOK_SECRET: `depot-whsec-canary${tail()}`,
  DIGITALOCEAN_TOKEN: `dop_v1_canary${tail()}`,
  ENCRYPTION_KEYS: `canarykid:${ringKey}`,
  STRIPE_SECRET_KEY: `sk_test_canary${tail()}`,
  STRIPE_WEBHOOK_SECRET: `whsec_canary${tail()}`,
  SPACES_ACCESS_KEY_ID: `DOCANARY${tail().toUpperCase()}`,
  SPACES_SECRET_ACCESS_KEY: `canary-spaces-secret-${tail()}${tail()}`,
};
/** What must never show for each secret: its value, and for the key ring each key in it. */
const NEEDLES: Record<SecretName, string[]> = Object.fromEntries(
  SECRET_NAMES.map((name) => [name, name === 'ENCRYPTION_KEYS' ? [CANARIES[name], ringKey] : [CANARIES[name]]]),
) as Record<SecretName, string[]>;
/** Text quoting every secret, as an adapter's error might quote the token it was given. */
const LEAK = SECRET_NAMES.map((name) => `${name}=${CANARIES[name]}`).join(' ') + ` key ${ringKey}`;

let h: WorkerHarness;
const DEPOT_URL = 'https://depot.canary.test';
let depotCalls = 0;
const outputs: Array<{ where: string; text: string }> = [];
let stored = '';

const bearer = (name: SecretName) => ({ authorization: `Bearer ${CANARIES[name]}` });
async function call(where: string, path: string, init: RequestInit & { json?: unknown } = {}) {
  const res = await h.request(path, { token: null, ...init });
  const text = await res.text();
  outputs.push({ where, text: `${res.status} ${[...res.headers].map(([k, v]) => `${k}: ${v}`).join('\n')}\n${text}` });
  return { status: res.status, headers: res.headers, text };
}

beforeAll(async () => {
  // the providers' APIs are the sandbox's: the cleanup sweep the tick backfills calls DigitalOcean
  // Depot is answered below, by a provider that quotes every secret in its errors
  const sandbox = { DIGITALOCEAN_API_URL: h0.TEST_SANDBOX_URL, DEPOT_API_URL: DEPOT_URL, DEPOT_PROJECT_ID: 'canary' };
  h = await createWorkerHarness({ ...CANARIES, ...sandbox, LOG_STEPS: 'true', TICK_BUDGET_MS: '1000', KICK_BUDGET_MS: '2000' } as never);
  for (const method of ['log', 'error', 'warn', 'info'] as const) {
    vi.spyOn(console, method).mockImplementation((...args: unknown[]) => void outputs.push({ where: `console.${method}`, text: args.map(String).join(' ') }));
  }
  const realFetch = globalThis.fetch;
  vi.spyOn(globalThis, 'fetch').mockImplementation(async (input, init) => {
    const url = input instanceof Request ? input.url : String(input);
    if (url.startsWith(`${DEPOT_URL}/`)) {
      // first an outage (retried), then a refusal (failed for good), each quoting every secret
      const outage = depotCalls++ === 0;
      const body = { code: outage ? 'unavailable' : 'invalid_argument', message: `upstream refused: ${LEAK}` };
      return new Response(JSON.stringify(body), { status: outage ? 503 : 400, headers: { 'content-type': 'application/json' } });
    }
    if (url !== CANARIES.ALERT_WEBHOOK_URL) return realFetch(input, init);
    outputs.push({ where: 'alert webhook body', text: String(init?.body) });
    return new Response('ok');
  });

  // a step whose provider fails quoting every secret: retried once, then failed for good (poison
  // alert). The secrets come from the provider, not the payload: a payload is shown as sent.
  await h.sql`insert into platform.accounts (id) values ('acct-canary')`;
  await h.sql`insert into platform.services (id, account_id) values ('svc-canary', 'acct-canary')`;
  const enqueued = await call('POST /v1/pushes', '/v1/pushes', {
    method: 'POST', headers: { ...bearer('ENQUEUE_TOKEN'), 'content-type': 'application/json' },
    body: JSON.stringify({ accountId: 'acct-canary', serviceId: 'svc-canary', branch: 'main', commitSha: 'abc1234' }),
  });
  expect(enqueued.status).toBe(201);
  const id = (JSON.parse(enqueued.text) as { job: { id: string } }).job.id;
  await h.sql`update worker.jobs set run_at = now() where id = ${id} and status = 'queued'`;
  // a maintenance pass that fails with an error quoting every secret
  await h.sql.unsafe(`create function public.canary_refuse() returns trigger language plpgsql as $$
                      begin raise exception '%', ${`'prune refused: ${LEAK}'`}; end $$`);
  await h.sql`create trigger canary_refuse before delete on worker.job_events for each statement execute function public.canary_refuse()`;
  await h.trigger('* * * * *');
  await h.sql`drop trigger canary_refuse on worker.job_events`;
  await h.sql`drop function public.canary_refuse()`;
  await h.sql`update worker.jobs set run_at = now() where id = ${id} and status = 'queued'`;
  await h.trigger('* * * * *');
  expect(await h.sql`select status from worker.jobs where id = ${id}`).toEqual([{ status: 'failed' }]);

  await call('GET /v1/jobs/:id', `/v1/jobs/${id}`, { headers: bearer('ENQUEUE_TOKEN') });
  await call('GET /v1/jobs', '/v1/jobs?status=failed', { headers: bearer('ADMIN_TOKEN') });
  await call('GET /metrics', '/metrics', { headers: bearer('METRICS_TOKEN') });
  const login = await call('POST /dashboard/login', '/dashboard/login', {
    method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: 'http://worker.test' },
    body: new URLSearchParams({ token: CANARIES.ADMIN_TOKEN, next: '/' }).toString(),
  });
  expect(login.status).toBe(303);
  const session = /__Host-starbase_session=([^;]+)/.exec(login.headers.get('set-cookie') ?? '')![1]!;
  const cookie = { cookie: `__Host-starbase_session=${session}` };
  const dashboard = await call('GET / (dashboard)', '/', { headers: cookie });
  expect(dashboard.text).toContain('poison_job');
  await call('GET /dashboard/jobs/:id', `/dashboard/jobs/${id}`, { headers: cookie });
  // the operator pages: the failed build's group and a bulk dry run's sample, and a rate key a
  // provider's 429 paused with an answer quoting every secret
  await call('GET /dashboard/dead-letters', '/dashboard/dead-letters', { headers: cookie });
  const csrf = /name="_csrf" value="([A-Za-z0-9_-]{43})"/.exec(dashboard.text)![1]!;
  const preview = await call('POST /dashboard/bulk/preview', '/dashboard/bulk/preview', {
    method: 'POST', headers: { ...cookie, 'content-type': 'application/x-www-form-urlencoded', origin: 'http://worker.test' },
    body: new URLSearchParams({ _csrf: csrf, op: 'retry', type: 'build', status: 'failed' }).toString(),
  });
  expect(preview.text).toContain(`data-job="${id}"`);
  await h.sql`insert into worker.rate_limits (key, max_starts, per_ms, paused_until, pause_reason)
              values ('provider:canary', 1, 60000, now() + interval '1 minute', ${`provider 429: ${LEAK}`})`;
  await call('GET /dashboard/flow', '/dashboard/flow', { headers: cookie });

  // what the engine stored: errors, events (but the enqueued event, which holds the payload as
  // given), alerts
  const [row] = await h.sql`
    select concat_ws(E'\n',
      (select string_agg(coalesce(last_error, '') || ' ' || coalesce(result::text, '') || ' ' || checkpoint::text, E'\n') from worker.jobs),
      (select string_agg(detail::text, E'\n') from worker.job_history where kind <> 'enqueued'),
      (select string_agg(message || ' ' || detail::text, E'\n') from worker.alerts)) as text`;
  stored = row!.text as string;
});

afterAll(() => {
  vi.restoreAllMocks();
});

describe('secret canaries', () => {
  it('reached every path: the leaks were scrubbed, not missed', () => {
    const where = (needle: string) => outputs.filter((o) => o.text.includes(needle)).map((o) => o.where);
    expect(where('upstream refused: ADMIN_TOKEN=[redacted]')).toEqual(expect.arrayContaining(['alert webhook body', 'GET /v1/jobs/:id']));
    expect(where('prune refused: ADMIN_TOKEN=[redacted]')).toEqual(expect.arrayContaining(['alert webhook body', 'console.log']));
    expect(where('upstream refused: ADMIN_TOKEN=[redacted]')).toEqual(expect.arrayContaining(['GET /dashboard/dead-letters', 'POST /dashboard/bulk/preview']));
    expect(where('provider 429: ADMIN_TOKEN=[redacted]')).toEqual(['GET /dashboard/flow']);
    expect(stored).toContain('upstream refused: ADMIN_TOKEN=[redacted]');
    expect(stored).toContain('prune refused: ADMIN_TOKEN=[redacted]');
  });

  it.each(SECRET_NAMES)('%s never appears in a log line, an alert, a stored error, an API answer or the dashboard', (name) => {
    for (const needle of NEEDLES[name]) {
      const leaked = outputs.filter((o) => o.text.includes(needle)).map((o) => o.where);
      expect(leaked, `${name} leaked`).toEqual([]);
      expect(stored.includes(needle), `${name} stored`).toBe(false);
    }
  });
});

describe('the list of secrets', () => {
  it('wrangler.toml and the README name exactly the secrets the Worker declares', () => {
    const wrangler = [...wranglerText.matchAll(/^#\s+secret: ([A-Z0-9_]+)\s/gm)].map((m) => m[1]);
    expect(wrangler).toEqual(SECRET_NAMES);
    const readme = readmeText;
    const deploying = readme.slice(readme.indexOf('## Deploying'), readme.indexOf('\n## ', readme.indexOf('## Deploying') + 1));
    const table = deploying.slice(deploying.indexOf('| secret | what for |'));
    const rows = [...table.slice(0, table.indexOf('\n\n')).matchAll(/^\s*\| `([A-Z0-9_]+)` \| (.+) \|$/gm)];
    expect(rows.map((r) => r[1])).toEqual(SECRET_NAMES);
    expect(rows.map((r) => r[2])).toEqual(WORKER_SECRETS.map((s) => s.purpose));
  });

  it('every secret-like name the Worker reads from its env is declared', () => {
    const names = new Set<string>();
    const sources = import.meta.glob('../../functions/**/*.{ts,tsx}', { query: '?raw', import: 'default', eager: true }) as Record<string, string>;
    for (const [path, source] of Object.entries(sources)) {
      if (path.endsWith('worker-configuration.d.ts')) continue;
      for (const m of source.matchAll(/\benv(?:\.|\[['"]|, ['"])([A-Z][A-Z0-9_]+)/g)) names.add(m[1]!);
      for (const m of source.matchAll(/['"]([A-Z][A-Z0-9_]*(?:TOKEN|SECRET|SECRET_KEY|ACCESS_KEY|ACCESS_KEY_ID|KEYS|WEBHOOK_URL|PASSWORD))['"]/g)) names.add(m[1]!);
    }
    const secretLike = [...names].filter((n) => /(TOKEN|SECRET|KEYS|KEYRING|WEBHOOK_URL|PASSWORD|API_KEY|PRIVATE_KEY|ACCESS_KEY)/.test(n)).sort();
    expect(secretLike).toEqual([...SECRET_NAMES].sort());
  });
});
