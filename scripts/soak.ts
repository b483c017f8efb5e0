import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type Sql } from '../queue/db.ts';
import { allEvents, allJobs, doubledWrites, openJobCounts } from '../queue/driver/tables.ts';
import { jobsBySubmitKeys } from '../queue/jobs-query.ts';
import type { Json } from '../queue/job.ts';
import { migrate } from '../queue/migrate.ts';
import { percentile } from '../bench/stats.ts';
import { checkHistory } from './lib/history.ts';
import { formatFailure, formatTrail, runModelHistories } from './lib/model/run.ts';
import { startEmbeddedPostgres } from './embedded-postgres.ts';
import { exitOnDatabaseError, fail, parseCli } from './lib/cli.ts';
import { withDatabase } from './lib/database-url.ts';
import { launchDevStack, type LaunchedDevStack } from './lib/dev-stack.ts';

// `npm run soak -- --minutes N [--rate R] [--concurrency C] [--seed S]`
// Boots the `npm start` stack on a fresh embedded Postgres in a temporary data folder, drives a
// steady concurrent load over HTTP only (enqueues of every sample type, batches, idempotent
// re-submits, debounced pushes, random cancels, retries of failed jobs, leases taken from running
// jobs, forced rescues), then lets the queue drain and checks the database: every job terminal
// (or queued for a reason), one result per done job, every job's event history consistent.
// Prints jobs/s, enqueue→start latency percentiles and errors; exits 1 if anything is off.
//
// `npm run soak -- --model [--seconds N] [--seed S]` instead runs the model-based concurrency test
// of the engine (test/engine/model.test.ts) for N seconds (default 300): seeded histories of
// concurrent rounds against a fresh database (DATABASE_URL's server, else an embedded Postgres),
// each checked against the reference model; prints how often the histories reached each case of
// signals, children and the rate key, and every violated invariant with its seed and history;
// exits 1 if there is one.
const USAGE = `usage: npm run soak -- [--minutes N] [--rate R] [--concurrency C] [--seed S] [--drain-seconds N]
       npm run soak -- --model [--seconds N] [--seed S]
Boots the \`npm start\` stack on a fresh embedded Postgres and drives a steady load over HTTP for
N minutes, then drains the queue and checks the database; exits 1 if anything is off.
--model instead runs the model-based concurrency test of the engine for N seconds (on
DATABASE_URL's server, else an embedded Postgres).

  --minutes N        how long the load runs (default 1)
  --rate R           operations per second (default 10)
  --concurrency C    operations at once, 1 to 256 (default 16)
  --seed S           the random seed (default: a new one, printed)
  --drain-seconds N  how long the queue may take to drain (default 120)
  --model            the model-based test instead
  --seconds N        its duration (default 300)
  -h, --help         this help`;
const { values } = parseCli({
  command: 'npm run soak',
  usage: USAGE,
  options: {
    minutes: { type: 'string', default: '1' },
    rate: { type: 'string', default: '10' },
    concurrency: { type: 'string', default: '16' },
    seed: { type: 'string' },
    'drain-seconds': { type: 'string', default: '120' },
    model: { type: 'boolean', default: false },
    seconds: { type: 'string', default: '300' },
  },
});
if (values.model) process.exit(await modelSoak());

/** The model-based test for `--seconds`; returns the exit code. */
async function modelSoak(): Promise<number> {
  const seconds = Number(values.seconds);
  if (!(seconds > 0 && seconds <= 24 * 3600)) fail('--seconds must be a number of seconds from 0 to 86400');
  const seed = values.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : Number(values.seed);
  if (!Number.isInteger(seed) || seed < 0) fail('--seed must be a non-negative integer');
  const say = (msg: string) => console.log(`[soak --model] ${msg}`);
  let adminUrl = process.env.DATABASE_URL;
  if (adminUrl) exitOnDatabaseError(adminUrl);
  let stopPostgres = async () => {};
  if (!adminUrl) {
    const dir = mkdtempSync(join(tmpdir(), 'starbase-soak-model-'));
    const pg = await startEmbeddedPostgres({ dataDir: dir, persistent: false });
    adminUrl = pg.url;
    stopPostgres = async () => {
      await pg.stop();
      rmSync(dir, { recursive: true, force: true });
    };
  }
  const name = `sbw_model_${process.pid}`;
  const admin = connect(adminUrl, { max: 1 });
  await admin.unsafe(`create database ${name}`);
  const url = withDatabase(adminUrl, name);
  const sql = connect(url, { max: 2 });
  try {
    await migrate(sql);
    say(`seed ${seed}; histories for ${seconds} s on database ${name}`);
    const started = Date.now();
    const report = await runModelHistories(sql, () => connect(url, { max: 1 }), {
      seed, untilMs: started + seconds * 1000, rounds: 150, log: say,
    });
    const elapsed = (Date.now() - started) / 1000;
    say(`${report.histories} histories, ${report.rounds} rounds, ${report.operations} operations in ${elapsed.toFixed(0)} s (${(report.operations / elapsed).toFixed(0)}/s)`);
    say(`signals, children and the rate key reached: ${Object.entries(report.coverage).map(([c, n]) => `${c} ${n}`).join(', ')}`);
    const invariants = [...new Set(report.failures.map((f) => f.invariant))];
    if (invariants.length === 0) {
      say(`ok: every invariant held (seed ${seed})`);
      return 0;
    }
    for (const invariant of invariants) {
      const of = report.failures.filter((f) => f.invariant === invariant);
      say(`VIOLATED ${invariant} in ${of.length} of ${report.histories} histories; the first:\n  ${formatFailure(of[0]!)}\n${formatTrail(of[0]!)}`);
    }
    say(`run it again: npm run soak -- --model --seconds ${seconds} --seed ${seed}`);
    return 1;
  } finally {
    await sql.end({ timeout: 5 });
    await admin.unsafe(`drop database if exists ${name} with (force)`);
    await admin.end({ timeout: 5 });
    await stopPostgres();
  }
}
const minutes = Number(values.minutes);
const rate = Number(values.rate);
const concurrency = Number(values.concurrency);
const drainSeconds = Number(values['drain-seconds']);
if (!(minutes > 0 && minutes <= 24 * 60)) fail('--minutes must be a number of minutes from 0 to 1440');
if (!(rate > 0 && rate <= 1000)) fail('--rate (operations per second) must be from 0 to 1000');
if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 256) fail('--concurrency must be an integer from 1 to 256');
const seed = Number(values.seed ?? Math.floor(Math.random() * 2 ** 31));

/** mulberry32: a small seeded PRNG, so a run's mix of operations can be replayed. */
let state = seed >>> 0;
function random(): number {
  state = (state + 0x6d2b79f5) >>> 0;
  let t = state;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
}
const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;

const log = (msg: string) => console.log(`[soak] ${msg}`);

// ---- the stack ----
const dataDir = mkdtempSync(join(tmpdir(), 'starbase-soak-'));
let stack: LaunchedDevStack | undefined;
async function stopStack(): Promise<void> {
  await stack?.stop();
  rmSync(dataDir, { recursive: true, force: true });
}
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    log(`${signal}: stopping the stack`);
    void stopStack().then(() => process.exit(130));
  });
}

log(`seed ${seed}; starting the npm start stack (embedded Postgres in ${dataDir})…`);
try {
  // no databaseUrl: always a fresh embedded Postgres, since the check reads the whole database
  stack = await launchDevStack({ dataDir, bootTimeoutMs: 180_000, outputLimit: 20_000 });
} catch (error) {
  console.error((error as Error).message);
  await stopStack();
  fail('the dev stack did not start');
}
const { baseUrl, token } = stack;
const { databaseUrl } = JSON.parse(readFileSync(join(dataDir, 'dev-stack.json'), 'utf8')) as { databaseUrl: string };
log(`stack up at ${baseUrl}; load for ${minutes} min at ${rate} operations/s, ${concurrency} at once`);

// ---- the load ----
interface Call {
  status: number;
  body: any;
  ms: number;
}
const latencies: Record<string, number[]> = {};
const statuses: Record<string, number> = {};
const errors: string[] = [];
const note = (what: string) => errors.length < 50 && errors.push(what);

async function call(kind: string, method: string, path: string, body?: unknown): Promise<Call | null> {
  const started = performance.now();
  try {
    const res = await fetch(`${baseUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    });
    const text = await res.text();
    const ms = performance.now() - started;
    (latencies[kind] ??= []).push(ms);
    statuses[`${kind} ${res.status}`] = (statuses[`${kind} ${res.status}`] ?? 0) + 1;
    return { status: res.status, body: text.startsWith('{') ? JSON.parse(text) : text, ms };
  } catch (error) {
    statuses[`${kind} network-error`] = (statuses[`${kind} network-error`] ?? 0) + 1;
    note(`${kind}: ${(error as Error).message}`);
    return null;
  }
}

function expectStatus(kind: string, res: Call | null, ok: number[]): Call | null {
  if (res && !ok.includes(res.status)) note(`${kind}: HTTP ${res.status} ${JSON.stringify(res.body).slice(0, 300)}`);
  return res && ok.includes(res.status) ? res : null;
}

const enqueued = new Map<string, string>(); // id → type
const cancelled = new Set<string>();
const submitKeys = new Map<string, string>(); // key → job id
const retried = new Set<string>();
let released = 0;
let operations = 0;

const delay = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function cancelLater(id: string) {
  await delay(random() * 300);
  const res = await call('cancel', 'POST', `/v1/jobs/${id}/cancel`, { reason: 'soak: random cancel' });
  // 409: it finished (or was cancelled) first
  if (expectStatus('cancel', res, [200, 409])?.status === 200) cancelled.add(id);
}

async function enqueueOne(body: Record<string, unknown>) {
  const res = expectStatus('enqueue', await call('enqueue', 'POST', '/v1/jobs', body), [201]);
  if (!res) return null;
  enqueued.set(res.body.job.id, body.type as string);
  if (random() < 0.05) void cancelLater(res.body.job.id);
  return res.body.job.id as string;
}

/** One operation of the mix. */
async function operate(): Promise<void> {
  operations++;
  const r = random();
  if (r < 0.5) {
    await enqueueOne({ type: 'uppercase', payload: { text: `soak ${operations}` } });
  } else if (r < 0.7) {
    await enqueueOne({ type: 'countdown', payload: { n: 1 + Math.floor(random() * 4), delayMs: Math.floor(random() * 100) } });
  } else if (r < 0.8) {
    // always throws: retries with backoff, then failed with a poison alert
    await enqueueOne({ type: 'fail', payload: { message: `soak failure ${operations}` }, maxAttempts: 2 });
  } else if (r < 0.85) {
    const jobs = Array.from({ length: 10 + Math.floor(random() * 40) }, (_, i) => ({ type: 'uppercase', payload: { text: `batch ${operations}.${i}` } }));
    const res = expectStatus('batch', await call('batch', 'POST', '/v1/jobs/batch', { jobs }), [201]);
    for (const job of res?.body.jobs ?? []) enqueued.set(job.id, 'uppercase');
  } else if (r < 0.92) {
    // an idempotent submit retried by its client: the same job back, never a second one
    const key = `soak-submit-${operations}`;
    const body = { type: 'uppercase', payload: { text: key }, submitKey: key };
    const id = await enqueueOne(body);
    if (!id) return;
    submitKeys.set(key, id);
    const again = expectStatus('resubmit', await call('resubmit', 'POST', '/v1/jobs', body), [200]);
    if (again && again.body.job.id !== id) note(`resubmit of ${key} answered job ${again.body.job.id}, not ${id}`);
  } else {
    // two pushes of one key in quick succession: the first waits 200 ms and is superseded by the second
    const key = `soak-push-${Math.floor(random() * 50)}`;
    await enqueueOne({ type: 'uppercase', payload: { text: key }, dedupeKey: key, delayMs: 200 });
    await enqueueOne({ type: 'uppercase', payload: { text: key }, dedupeKey: key, delayMs: 200 });
  }
}

/** Operator-style traffic beside the load: retry failed jobs, take leases from running ones, force a rescue. */
async function operator(stop: AbortSignal) {
  for (let tick = 0; !stop.aborted; tick++) {
    await delay(1000);
    const failed = expectStatus('list', await call('list', 'GET', '/v1/jobs?status=failed&limit=20'), [200]);
    for (const job of failed?.body.jobs ?? []) {
      if (retried.has(job.id) || random() > 0.3) continue;
      retried.add(job.id);
      expectStatus('retry', await call('retry', 'POST', `/v1/jobs/${job.id}/retry`, {}), [200, 409]);
    }
    if (tick % 3 === 0) {
      // take the lease from a running job: its owner's settle is fenced out and the job runs again
      const running = expectStatus('list', await call('list', 'GET', '/v1/jobs?status=running&limit=10'), [200]);
      const victim = running?.body.jobs?.[0];
      if (victim) {
        const res = expectStatus('release', await call('release', 'POST', `/v1/jobs/${victim.id}/release`, {}), [200, 409]);
        if (res?.status === 200) released++;
      }
    }
    if (tick % 15 === 0) expectStatus('rescue', await call('rescue', 'POST', '/v1/maintenance/rescue'), [200]);
  }
}

const loadStarted = Date.now();
const loadEnds = loadStarted + minutes * 60_000;
const stopOperator = new AbortController();
const operatorDone = operator(stopOperator.signal);
let inflight = 0;
let late = 0;
let lastReport = Date.now();
for (let i = 0; Date.now() < loadEnds; i++) {
  const due = loadStarted + (i * 1000) / rate;
  if (due > Date.now()) await delay(due - Date.now());
  if (inflight >= concurrency) {
    late++; // the stack is behind: the open-loop rate waits for a free slot rather than piling up
    while (inflight >= concurrency) await delay(5);
  }
  inflight++;
  void operate().finally(() => inflight--);
  if (Date.now() - lastReport > 15_000) {
    lastReport = Date.now();
    log(`${Math.round((Date.now() - loadStarted) / 1000)} s: ${operations} operations, ${enqueued.size} jobs, ${errors.length} errors`);
  }
}
while (inflight > 0) await delay(10);
stopOperator.abort();
await operatorDone;
const loadSeconds = (Date.now() - loadStarted) / 1000;
log(`load done: ${operations} operations in ${loadSeconds.toFixed(0)} s; letting the queue drain…`);

// ---- drain and check ----
const sql = connect(databaseUrl, { max: 2 });
const drainDeadline = Date.now() + drainSeconds * 1000;
let open = await openJobCounts(sql);
while ((open.running > 0 || open.due > 0 || open.later > 0) && Date.now() < drainDeadline) {
  // the tick runs due work every minute; a kick (here: a forced rescue) starts it sooner
  await call('rescue', 'POST', '/v1/maintenance/rescue');
  await delay(2000);
  open = await openJobCounts(sql);
}

const problems: string[] = [];
const { jobs, problems: history, tally } = await checkHistory(sql);
problems.push(...history.slice(0, 20));
const missing = [...enqueued.keys()].filter((id) => !jobs.some((j) => j.id === id));
if (missing.length) problems.push(`${missing.length} enqueued jobs are missing, e.g. ${missing.slice(0, 3).join(', ')}`);
const rows = await allJobs(sql);
const dbNow = Date.now();
const stuck = rows
  .filter((j) => j.status === 'running' || (j.status === 'queued' && j.runAt.getTime() <= dbNow))
  .map((j) => ({ id: j.id, type: j.type, status: j.status, run_at: j.runAt, locked_until: j.lockedUntil }));
if (stuck.length) problems.push(`${stuck.length} jobs still running or due after the drain, e.g. ${JSON.stringify(stuck.slice(0, 3))}`);
const doubled = await doubledWrites(sql);
const dupes = { done_twice: doubled.doneTwice, stray_results: doubled.strayResults, submit_twice: doubled.submitTwice };
if (dupes.done_twice || dupes.stray_results || dupes.submit_twice) problems.push(`duplicates: ${JSON.stringify(dupes)}`);
const bySubmitKey = new Map((await jobsBySubmitKeys(sql, [...submitKeys.keys()])).map((j) => [j.submitKey, j.id]));
for (const [key, id] of submitKeys) {
  const found = bySubmitKey.get(key);
  if (found !== id) problems.push(`submit key ${key}: job ${found} in the database, ${id} answered`);
}
const textOf = (value: Json, key: string) => (typeof value === 'object' && value !== null && !Array.isArray(value) ? value[key] : undefined);
const wrongResults = rows.filter((j) => j.status === 'done' && (
  (j.type === 'uppercase' && String(textOf(j.result, 'text')) !== String(j.payload.text).toUpperCase())
  || (j.type === 'countdown' && Number(textOf(j.result, 'steps')) !== Number(j.payload.n)))).length;
if (wrongResults > 0) problems.push(`${wrongResults} done jobs with a wrong result`);
const cancelledLeft = rows.filter((j) => cancelled.has(j.id) && !['cancelled', 'done', 'failed'].includes(j.status)).length;
if (cancelledLeft > 0) problems.push(`${cancelledLeft} cancelled jobs ended neither cancelled nor finished`);

// ---- figures ----
const statusCounts = new Map<string, number>();
for (const j of rows) statusCounts.set(j.status, (statusCounts.get(j.status) ?? 0) + 1);
const byStatus = [...statusCounts].sort(([a], [b]) => (a < b ? -1 : 1)).map(([status, n]) => ({ status, n }));
const window = {
  finished_in_load: rows.filter((j) => j.finishedAt !== null && j.finishedAt.getTime() <= loadEnds).length,
  steps_in_load: (await allEvents(sql, { kind: 'claimed' })).filter((e) => e.at.getTime() <= loadEnds).length,
};
const startMs = rows
  .filter((j) => j.startedAt !== null && j.runAt.getTime() === j.createdAt.getTime() && j.submitKey === null && j.dedupeKey === null
    && j.createdAt.getTime() <= loadEnds)
  .map((j) => (j.startedAt?.getTime() ?? 0) - j.createdAt.getTime())
  .sort((a, b) => a - b);
const enqueueMs = latencies.enqueue ?? [];
const fmt = (n: number) => (Number.isNaN(n) ? '-' : `${n.toFixed(0)} ms`);
const errorStatuses = Object.entries(statuses).filter(([k]) => / (5\d\d|network-error)$/.test(k));

console.log(`
  soak: ${minutes} min at ${rate} operations/s (seed ${seed}), ${concurrency} requests at once
  machine       ${(await import('node:os')).cpus().length} cores, ${Math.round((await import('node:os')).totalmem() / 2 ** 30)} GiB

  operations    ${operations} (${(operations / loadSeconds).toFixed(1)}/s; ${late} waited for a free slot)
  jobs          ${enqueued.size} enqueued (${(enqueued.size / loadSeconds).toFixed(1)}/s), ${window.finished_in_load} finished during the load (${(window.finished_in_load / loadSeconds).toFixed(1)}/s), ${window.steps_in_load} steps (${(window.steps_in_load / loadSeconds).toFixed(1)}/s)
  ended         ${byStatus.map((r) => `${r.status} ${r.n}`).join(', ')}
  operator      ${cancelled.size} cancels, ${retried.size} retries, ${released} leases taken from running jobs, ${tally.leaseExpired} leases expired
  enqueue→start p50 ${fmt(percentile(startMs, 50))}  p90 ${fmt(percentile(startMs, 90))}  p99 ${fmt(percentile(startMs, 99))}  max ${fmt(startMs.at(-1) ?? NaN)}  (${startMs.length} jobs due at once)
  POST /v1/jobs p50 ${fmt(percentile(enqueueMs, 50))}  p99 ${fmt(percentile(enqueueMs, 99))}
  HTTP          ${Object.entries(statuses).sort().map(([k, v]) => `${k}: ${v}`).join(', ')}
  errors        ${errorStatuses.length ? errorStatuses.map(([k, v]) => `${k}: ${v}`).join(', ') : 'none'}${errors.length ? `\n                ${errors.slice(0, 10).join('\n                ')}` : ''}
  consistency   ${problems.length ? `FAILED\n                ${problems.join('\n                ')}` : `ok: ${jobs.length} jobs, every one terminal, one result per done job, every event history replays`}
`);

await sql.end();
await stopStack();
const clean = problems.length === 0 && errorStatuses.length === 0 && errors.length === 0;
if (!clean) console.log(`last lines of the stack:\n${stack.output().split('\n').filter((l) => l.trim()).slice(-40).join('\n')}`);
process.exit(clean ? 0 : 1);
