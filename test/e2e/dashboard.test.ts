import { mkdirSync, readFileSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseExposition } from '../../functions/lib/prometheus.ts';
import { testBrowser } from '../support/browser.ts';
import { startDevStack, type DevStack } from '../support/dev-stack.ts';

/**
 * The dashboard in a real browser — Chromium driven by playwright-core: Debian's when installed,
 * else the one the npm package @sparticuz/chromium ships (test/support/browser.ts; never a
 * downloaded browser) — against the `npm start` stack: log in, see a job enqueued through the API
 * with its status, cancel it from its page, see the status change; follow a running build's log
 * live (its one script, a hostile line kept text, the fallbacks to reloading). Screenshots go to
 * test-artifacts/; with STARBASE_DOCS_SCREENSHOT=1 the overview is also saved as
 * docs/dashboard.png (the README's screenshot).
 */
const ARTIFACTS = 'test-artifacts';

let stack: DevStack;
let browser: Browser;
let page: Page;
beforeAll(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  stack = await startDevStack();
  const found = testBrowser();
  browser = await chromium.launch({
    executablePath: found.executablePath,
    env: found.env,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  page = await (await browser.newContext({ viewport: { width: 1360, height: 1000 } })).newPage();
}, 150_000);
afterAll(async () => {
  await browser?.close();
});

async function enqueue(body: Record<string, unknown>): Promise<string> {
  const res = await stack.api('/v1/jobs', { method: 'POST', body: JSON.stringify(body) });
  expect(res.status).toBe(201);
  return ((await res.json()) as { job: { id: string } }).job.id;
}

async function statusOf(id: string): Promise<string> {
  return ((await (await stack.api(`/v1/jobs/${id}`)).json()) as { job: { status: string } }).job.status;
}

/** A quarter-hour of queue-depth history, so the chart has a shape (the tick adds one point a minute). */
async function seedDepthHistory() {
  const sql = postgres(stack.databaseUrl, { max: 1, onnotice: () => {} });
  try {
    await sql`insert into worker.depth_snapshots (at, queued, due, running)
              select date_trunc('minute', now()) - make_interval(mins => m),
                     greatest(0, 9 + 7 * sin(m / 17.0) + 3 * sin(m / 5.0))::int, greatest(0, 3 + 3 * sin(m / 7.0))::int, (3 + 1.5 * cos(m / 11.0))::int
                from generate_series(1, 240) m
              on conflict do nothing`;
  } finally {
    await sql.end();
  }
}

describe('the dashboard in chromium', () => {
  it('asks for the admin token, then shows the overview with a secure session cookie', async () => {
    await page.goto(`${stack.baseUrl}/`);
    expect(new URL(page.url()).pathname).toBe('/dashboard/login');
    await page.fill('#token', 'not-the-token');
    await page.click('button[type=submit]');
    await expect.poll(() => page.textContent('[role=alert]')).toContain('not the admin token');

    await page.fill('#token', stack.token);
    await page.click('button[type=submit]');
    await page.waitForURL(`${stack.baseUrl}/`);
    expect(await page.textContent('#counters')).toContain('queued');
    const [cookie] = await page.context().cookies();
    expect(cookie).toMatchObject({ name: '__Host-starbase_session', httpOnly: true, secure: true, sameSite: 'Strict', path: '/' });
    expect(cookie!.value).not.toContain(stack.token);
  });

  it('shows a job enqueued through the API with its status, cancels it from its page, and shows the change', async () => {
    await seedDepthHistory();
    await fetch(`${stack.baseUrl}/__scheduled?cron=${encodeURIComponent('* * * * *')}`); // a tick: lease, snapshot
    await enqueue({ type: 'uppercase', payload: { text: 'done at once' } });
    const failed = await enqueue({ type: 'fail', payload: { message: 'upstream said no' }, maxAttempts: 1 });
    const between = await enqueue({ type: 'countdown', payload: { n: 3, delayMs: 600_000 } }); // its first step runs in the kick
    const id = await enqueue({ type: 'uppercase', payload: { text: 'cancel me', apiToken: 'never-shown' }, delayMs: 3_600_000 });
    await expect.poll(() => statusOf(failed)).toBe('failed');

    await page.goto(`${stack.baseUrl}/`);
    const row = page.locator(`tr[data-job="${id}"]`);
    expect(await row.locator('[data-status]').textContent()).toBe('queued');
    expect(await page.locator(`tr[data-job="${failed}"] [data-status]`).textContent()).toBe('failed');
    expect(await page.locator('[data-alert="poison_job"]').count()).toBeGreaterThanOrEqual(1);
    // queued between steps is in progress: in the in-progress panel with its next step's due time, and marked in the list
    expect(await page.textContent('#in-progress h2')).toMatch(/^In progress \(\d+: \d+ running, \d+ between steps\)$/);
    expect(await page.textContent(`tr[data-in-progress="${between}"]`)).toMatch(/count.*next step in (9|10)m/);
    expect(await page.textContent(`tr[data-job="${between}"] td:nth-child(3)`)).toBe('queued in progress');
    await page.screenshot({ path: `${ARTIFACTS}/dashboard-overview.png`, fullPage: true });
    if (process.env.STARBASE_DOCS_SCREENSHOT === '1') await page.screenshot({ path: 'docs/dashboard.png', fullPage: true });

    await row.locator('a').first().click();
    await page.waitForURL(`${stack.baseUrl}/dashboard/jobs/${id}`);
    expect(await page.textContent('h1 [data-status]')).toBe('queued');
    expect(await page.textContent('body')).toContain('[redacted]');
    expect(await page.textContent('body')).not.toContain('never-shown');
    await page.screenshot({ path: `${ARTIFACTS}/dashboard-job-queued.png`, fullPage: true });

    await page.click('#job-actions button:has-text("Cancel")');
    await page.waitForURL(`${stack.baseUrl}/dashboard/jobs/${id}?done=cancel`);
    expect(await page.textContent('h1 [data-status]')).toBe('cancelled');
    expect(await page.textContent('[role=status]')).toBe('Cancelled.');
    expect(await page.locator('#events [data-kind="cancelled"]').count()).toBe(1);
    await page.screenshot({ path: `${ARTIFACTS}/dashboard-job-cancelled.png`, fullPage: true });
    expect(await statusOf(id)).toBe('cancelled');

    await page.goto(`${stack.baseUrl}/?status=cancelled`);
    expect(await page.locator(`tr[data-job="${id}"] [data-status]`).textContent()).toBe('cancelled');
  });

  it('searches from the box, pages on with "older", and never runs a script a search or a payload carries', async () => {
    const dialogs: string[] = [];
    page.on('dialog', (d) => { dialogs.push(d.message()); void d.dismiss(); });
    const batch = `e2e-${Date.now()}`;
    const jobs = Array.from({ length: 27 }, (_, i) => ({ type: 'uppercase', payload: { text: `<img src=x onerror=alert(${i})>`, batch }, runAt: '2099-01-01T00:00:00Z' }));
    expect((await stack.api('/v1/jobs/batch', { method: 'POST', body: JSON.stringify({ jobs }) })).status).toBe(201);

    await page.goto(`${stack.baseUrl}/dashboard/jobs`);
    await page.fill('input[name=q]', `batch=${batch}`);
    await page.click('form[role=search] button[type=submit]');
    await page.waitForURL(/\/dashboard\/jobs\?q=/);
    expect(await page.locator('tr[data-job]').count()).toBe(25);
    expect(await page.textContent('#search-note')).toContain('a scan');
    await page.click('#older');
    await page.waitForURL(/cursor=/);
    expect(await page.locator('tr[data-job]').count()).toBe(2);
    await page.screenshot({ path: `${ARTIFACTS}/dashboard-jobs-search.png`, fullPage: true });

    await page.fill('input[name=q]', '"><script>alert(1)</script>');
    await page.click('form[role=search] button[type=submit]');
    expect(await page.inputValue('input[name=q]')).toBe('"><script>alert(1)</script>');
    await page.goto(`${stack.baseUrl}/dashboard/schedules`);
    expect(await page.locator('tr[data-schedule="cleanup"]').count()).toBe(1);
    await page.goto(`${stack.baseUrl}/dashboard/history?window=1h`);
    await page.screenshot({ path: `${ARTIFACTS}/dashboard-history.png`, fullPage: true });
    expect(dialogs).toEqual([]);
  });

  it("follows a running build's log live, without reloading, and shows a hostile line as text", async () => {
    const dialogs: string[] = [];
    page.on('dialog', (d) => { dialogs.push(d.message()); void d.dismiss(); });
    // the sandbox's lines quote the service id: every line of this build carries markup
    const serviceId = `svc-${Date.now()}-<img src=x onerror=alert(1)>`;
    const sql = postgres(stack.databaseUrl, { max: 1, onnotice: () => {} });
    try {
      await sql`insert into platform.accounts (id) values ('acct-e2e-live') on conflict do nothing`;
      await sql`insert into platform.services (id, account_id) values (${serviceId}, 'acct-e2e-live')`;
    } finally {
      await sql.end();
    }
    const { sandboxUrl } = JSON.parse(readFileSync(`${stack.dataDir}/dev-stack.json`, 'utf8')) as { sandboxUrl: string };
    const scripted = await fetch(`${sandboxUrl}/_sandbox/depot/script`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ serviceId, outcome: 'hang', polls: 1000, lines: 1000, linesPerPoll: 1 }), // a line a poll (2 s)
    });
    expect(scripted.status).toBe(200);
    const push = await stack.api('/v1/pushes', { method: 'POST', body: JSON.stringify({ accountId: 'acct-e2e-live', serviceId, branch: 'main', commitSha: 'abc1234' }) });
    expect(push.status).toBe(201);
    const { job } = (await push.json()) as { job: { id: string } };
    // after the push's 5 s debounce, its first poll archives line 1
    await expect.poll(async () => ((await (await stack.api(`/v1/builds/${job.id}/logs`)).text()).includes('#1/1000')), { timeout: 30_000 }).toBe(true);

    await page.goto(`${stack.baseUrl}/dashboard/jobs/${job.id}`);
    expect(await page.locator('meta[http-equiv=refresh]').count()).toBe(0); // the script, not a reload, keeps it live
    await page.evaluate(() => { (window as unknown as { sameDocument: boolean }).sameDocument = true; });
    const tail = page.locator('#build-log-tail');
    const shown = Number(await tail.getAttribute('data-last-seq'));
    expect(shown).toBeGreaterThanOrEqual(1);
    await expect.poll(() => page.textContent('#build-log-state'), { timeout: 15_000 }).toContain('live');
    const next = shown + 2; // two polls on: surely relayed, not rendered
    await expect.poll(() => tail.textContent(), { timeout: 20_000 }).toContain(`#${next}/1000`);
    expect(await page.evaluate(() => (window as unknown as { sameDocument?: boolean }).sameDocument)).toBe(true); // no reload
    const text = (await tail.textContent())!;
    expect(text).toContain(`${serviceId}@abc1234 #${next}/1000`); // the markup as text
    expect(text.match(new RegExp(`#${next}/1000`, 'g'))).toHaveLength(1); // each line once (backlog and tail overlap)
    expect(await page.locator('#build-log-panel img').count()).toBe(0);
    await page.screenshot({ path: `${ARTIFACTS}/dashboard-build-live.png`, fullPage: true });

    // Side by side, each in its own browser context on the same session: a socket that closes
    // unexpectedly and a browser that runs no scripts (its <noscript> refresh) each reload the page
    // 10 s on; a relay (scripted here) that repeats a line the page shows, skips lines and ends is
    // shown without the repeat, with the gap named, and the ended page stays put.
    const session = await page.context().storageState();
    const relayed = (seq: number, text: string) => ({ seq, text });
    const [dropped, noScripts, ended] = await Promise.all((['drop', 'noscript', 'relay'] as const).map(async (mode) => {
      const context = await browser.newContext({ storageState: session, javaScriptEnabled: mode !== 'noscript' });
      const other = await context.newPage();
      let last = 0;
      if (mode === 'drop') await other.routeWebSocket(/\/live$/, (ws) => ws.close());
      if (mode === 'relay') {
        await other.routeWebSocket(/\/live$/, async (ws) => {
          last = Number(await other.locator('#build-log-tail').getAttribute('data-last-seq')); // where the rendered tail ends
          ws.send(JSON.stringify({ type: 'lines', lines: [relayed(last, 'REPEATED'), relayed(last + 1, 'NEXT <b>bold</b>'), relayed(last + 4, 'AFTER A GAP')] }));
          ws.send(JSON.stringify({ type: 'end', outcome: 'succeeded' }));
          ws.close();
        });
      }
      await other.goto(`${stack.baseUrl}/dashboard/jobs/${job.id}`);
      const loaded = Date.now();
      if (mode === 'drop') await expect.poll(() => other.textContent('#build-log-state')).toContain('the live log closed: reloading in 10 s');
      const navigated = await other.waitForEvent('framenavigated', { timeout: 12_000 }).then(() => Date.now() - loaded, () => null);
      const tailText = mode === 'relay' ? await other.textContent('#build-log-tail') : null;
      const state = mode === 'relay' ? await other.textContent('#build-log-state') : null;
      const bold = mode === 'relay' ? await other.locator('#build-log-tail b').count() : null;
      await context.close();
      return { navigated, tailText, state, bold, last };
    }));
    expect(dropped!.navigated).toBeGreaterThan(9_000);
    expect(noScripts!.navigated).toBeGreaterThan(9_000);
    expect(ended!.navigated).toBeNull(); // the build ended: no reload
    expect(ended!.state).toBe('build ended: succeeded show its final state');
    expect(ended!.tailText).not.toContain('REPEATED');
    expect(ended!.tailText).toContain(`NEXT <b>bold</b>\n[lines ${ended!.last + 2}-${ended!.last + 3} were not relayed: the whole log has them]\nAFTER A GAP`);
    expect(ended!.bold).toBe(0);

    expect((await stack.api(`/v1/jobs/${job.id}/cancel`, { method: 'POST', body: '{}' })).status).toBe(200);
    await expect.poll(() => page.textContent('#build-log-state'), { timeout: 20_000 }).toContain('build ended: cancelled');
    expect(dialogs).toEqual([]);
  });

  it('pauses a job type from the flow-control page and resumes it', async () => {
    const pauses = async () => ((await (await stack.api('/v1/pauses')).json()) as { pauses: Array<{ name: string; pausedBy: string }> }).pauses;
    await page.goto(`${stack.baseUrl}/`);
    await page.click('header.top nav a:has-text("Flow control")');
    await page.waitForURL(`${stack.baseUrl}/dashboard/flow`);
    await page.selectOption('#pause-form select[name=kind]', 'type');
    await page.fill('#pause-form input[name=name]', 'countdown');
    await page.fill('#pause-form input[name=reason]', 'e2e: provider incident');
    await page.click('#pause-form button[type=submit]');
    await page.waitForURL(`${stack.baseUrl}/dashboard/flow?done=paused`);
    const row = page.locator('tr[data-pause="type:countdown"]');
    expect(await row.textContent()).toContain('e2e: provider incident');
    expect(await pauses()).toMatchObject([{ name: 'countdown', pausedBy: 'dashboard' }]);
    await page.screenshot({ path: `${ARTIFACTS}/dashboard-flow-paused.png`, fullPage: true });

    await row.locator('button:has-text("Resume")').click();
    await page.waitForURL(`${stack.baseUrl}/dashboard/flow?done=resumed`);
    expect(await page.locator('tr[data-pause]').count()).toBe(0);
    expect(await pauses()).toEqual([]);
  });

  it('refuses an action posted from another origin, even with the session cookie', async () => {
    const [cookie] = await page.context().cookies();
    const id = await enqueue({ type: 'uppercase', payload: { text: 'keep' }, delayMs: 3_600_000 });
    const res = await fetch(`${stack.baseUrl}/dashboard/jobs/${id}/cancel`, {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie: `${cookie!.name}=${cookie!.value}`, origin: 'https://evil.example', 'content-type': 'application/x-www-form-urlencoded' },
      body: '_csrf=whatever',
    });
    expect(res.status).toBe(403);
    expect(await statusOf(id)).toBe('queued');
  });

  it('serves /metrics that a strict parser accepts, with the numbers the dashboard shows', async () => {
    const res = await stack.api('/metrics');
    expect(res.status).toBe(200);
    const families = parseExposition(await res.text());
    const cancelled = families.find((f) => f.name === 'starbase_queue_depth')!.samples.find((s) => s.labels.status === 'cancelled')!;
    expect(cancelled.value).toBeGreaterThanOrEqual(1);
  });
});
