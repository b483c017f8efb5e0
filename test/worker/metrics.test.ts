/// <reference types="vite/client" />
import { beforeAll, describe, expect, it } from 'vitest';
import { parseExposition, type ParsedFamily } from '../../functions/lib/prometheus.ts';
import grafanaText from '../../ops/grafana/starbase-worker.json?raw';
import rulesText from '../../ops/prometheus/starbase-worker.rules.yml?raw';
import { createWorkerHarness, type WorkerHarness } from './support.ts';

let h: WorkerHarness;
beforeAll(async () => {
  h = await createWorkerHarness();
});

const TICK = '* * * * *';
const CLEANUP = '*/15 * * * *';

async function scrape(): Promise<{ text: string; families: ParsedFamily[] }> {
  const res = await h.request('/metrics', { token: 'metrics' });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
  const text = await res.text();
  return { text, families: parseExposition(text) };
}

function value(families: ParsedFamily[], name: string, labels: Record<string, string> = {}): number | undefined {
  for (const f of families) {
    for (const s of f.samples) {
      if (s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v)) return s.value;
    }
  }
  return undefined;
}

const post = (path: string, json: unknown) => h.request(path, { method: 'POST', json });

describe('GET /metrics', () => {
  it('needs the metrics scope', async () => {
    expect((await h.request('/metrics', { token: null })).status).toBe(401);
    expect((await h.request('/metrics', { token: 'enqueue' })).status).toBe(403);
    expect((await h.request('/metrics', { token: 'admin' })).status).toBe(200);
  });

  it('scrapes cleanly and reports depth, ages, stuck jobs, steps, retries, poison, schedules, the lease and alerts', async () => {
    // done: one uppercase job, run by the enqueue's kick
    expect((await post('/v1/jobs', { type: 'uppercase', payload: { text: 'metrics' } })).status).toBe(201);
    // poison: a job failing on its only attempt; retried: a job failing its first of three
    await post('/v1/jobs', { type: 'fail', payload: {}, maxAttempts: 1 });
    await post('/v1/jobs', { type: 'fail', payload: {}, maxAttempts: 3 });
    // a due job waiting 10 minutes (enqueued in SQL: no kick), and a stuck one
    await h.sql`select * from worker.enqueue_job(type => 'countdown', payload => '{"n": 1}', pool => 'elsewhere', run_at => now() - interval '10 minutes')`;
    const [stuck] = await h.sql`select id from worker.enqueue_job(type => 'countdown', payload => '{"n": 1}', run_at => now() + interval '1 day')`;
    await h.sql`update worker.jobs set status = 'running', attempts = 1, started_at = now() - interval '3 hours', claimed_at = now() - interval '3 hours',
                  locked_until = now() + interval '1 hour', locked_by = 'slow-host', lease_token = gen_random_uuid() where id = ${stuck!.id}`;
    // a schedule that succeeded, and a leader tick (lease, snapshot, dead-man check)
    await h.trigger(CLEANUP, new Date());
    await h.trigger(TICK, new Date());

    const { families } = await scrape();
    const names = families.map((f) => f.name);
    for (const name of ['starbase_jobs', 'starbase_queue_depth', 'starbase_step_duration_seconds', 'starbase_leader_generation', 'starbase_alerts_total']) {
      expect(names).toContain(name);
    }
    expect(value(families, 'starbase_jobs', { status: 'done', type: 'uppercase' })).toBe(1);
    expect(value(families, 'starbase_queue_depth', { status: 'failed' })).toBeGreaterThanOrEqual(1);
    expect(value(families, 'starbase_queue_depth', { status: 'running' })).toBe(1);
    expect(value(families, 'starbase_oldest_queued_job_age_seconds')).toBeGreaterThanOrEqual(600);
    expect(value(families, 'starbase_oldest_running_job_age_seconds')).toBeGreaterThanOrEqual(3 * 3600);
    expect(value(families, 'starbase_stuck_jobs', { type: 'countdown' })).toBe(1);
    expect(value(families, 'starbase_stuck_jobs', { type: 'uppercase' })).toBe(0);
    expect(value(families, 'starbase_stuck_job_threshold_seconds')).toBe(7200);
    expect(value(families, 'starbase_step_duration_seconds_count', { type: 'uppercase' })).toBe(1);
    expect(value(families, 'starbase_step_duration_seconds_bucket', { type: 'uppercase', le: '+Inf' })).toBe(1);
    expect(value(families, 'starbase_steps_total', { type: 'uppercase', outcome: 'done' })).toBe(1);
    expect(value(families, 'starbase_job_retries_total', { type: 'fail' })).toBeGreaterThanOrEqual(1);
    expect(value(families, 'starbase_poison_jobs_total', { type: 'fail' })).toBeGreaterThanOrEqual(1);
    expect(value(families, 'starbase_poison_jobs_total', { type: 'uppercase' })).toBe(0);
    expect(value(families, 'starbase_schedule_last_success_timestamp_seconds', { schedule: 'cleanup' })).toBeGreaterThan(Date.now() / 1000 - 120);
    expect(value(families, 'starbase_schedule_missed', { schedule: 'cleanup' })).toBe(0);
    expect(value(families, 'starbase_leader_generation')).toBeGreaterThanOrEqual(1);
    expect(value(families, 'starbase_leader_info', { holder: 'default' })).toBe(1);
    expect(value(families, 'starbase_leader_lease_expires_timestamp_seconds')).toBeGreaterThan(Date.now() / 1000);
    expect(value(families, 'starbase_tick_last_run_timestamp_seconds')).toBeGreaterThan(Date.now() / 1000 - 120);
    expect(value(families, 'starbase_alerts_total', { kind: 'poison_job' })).toBeGreaterThanOrEqual(1);
    expect(value(families, 'starbase_alerts_open', { kind: 'stuck_job' })).toBe(1);
    expect(value(families, 'starbase_alerts_total', { kind: 'leader_churn' })).toBe(0);
  });

  it('reports the jobs past their deadline by type and severity, each with its alert from the tick', async () => {
    const late = async (severity: string) => {
      const [job] = await h.sql`select id from worker.enqueue_job(type => 'countdown', payload => '{"n": 1}', run_at => now() + interval '1 day',
                                                               deadline_ms => 60000, deadline_severity => ${severity})`;
      // enqueued five hours ago: its minute is long past
      await h.sql`update worker.jobs set created_at = now() - interval '5 hours', deadline_at = now() - interval '5 hours' + interval '1 minute' where id = ${job!.id}`;
      return job!.id as string;
    };
    const critical = await late('critical');
    await late('warning');
    await h.sql`select * from worker.enqueue_job(type => 'countdown', payload => '{"n": 1}', run_at => now() + interval '1 day', deadline_ms => 3600000)`;
    const before = (await scrape()).families;
    expect(value(before, 'starbase_jobs_past_deadline', { type: 'countdown', severity: 'critical' })).toBe(1);
    expect(value(before, 'starbase_jobs_past_deadline', { type: 'countdown', severity: 'warning' })).toBe(1);
    expect(value(before, 'starbase_jobs_past_deadline', { type: 'uppercase', severity: 'critical' })).toBe(0);
    await h.trigger(TICK, new Date());
    const { families } = await scrape();
    expect(value(families, 'starbase_alerts_open', { kind: 'deadline_missed' })).toBe(2);
    const [alert] = await h.sql`select severity from worker.alerts where kind = 'deadline_missed' and key = ${critical}`;
    expect(alert!.severity).toBe('critical');
  });

  it('reports paused types and pools, and each rate key: its window, its limit, a 429 pause', async () => {
    await h.sql`select worker.pause_claims('type', 'countdown', 'alice', 'provider incident')`;
    await h.sql`insert into worker.rate_limits (key, max_starts, per_ms, starts, paused_until)
                values ('metrics:provider', 250, 60000, array[now(), now()], now() + interval '1 minute')`;
    try {
      const { families } = await scrape();
      expect(value(families, 'starbase_claims_paused', { kind: 'type', name: 'countdown' })).toBe(1);
      expect(value(families, 'starbase_rate_limit_window_starts', { key: 'metrics:provider' })).toBe(2);
      expect(value(families, 'starbase_rate_limit_limit', { key: 'metrics:provider' })).toBe(250);
      expect(value(families, 'starbase_rate_limit_paused', { key: 'metrics:provider' })).toBe(1);
    } finally {
      await h.sql`select worker.resume_claims('type', 'countdown')`;
      await h.sql`delete from worker.rate_limits where key = 'metrics:provider'`;
    }
    expect(value((await scrape()).families, 'starbase_claims_paused', { kind: 'type', name: 'countdown' })).toBeUndefined();
  });

  it('counts each step once, before and after the roll-up of its events', async () => {
    const before = await scrape();
    await h.sql`select worker.rollup_job_events(0)`;
    const [rollup] = await h.sql`select last_event_id from worker.event_rollup`;
    expect(Number(rollup!.last_event_id)).toBeGreaterThan(0);
    const after = await scrape();
    const counters = (fs: ParsedFamily[]) =>
      fs.filter((f) => f.type === 'counter' || f.type === 'histogram').flatMap((f) => f.samples.map((s) => `${s.name}${JSON.stringify(s.labels)} ${s.value}`));
    expect(counters(after.families)).toEqual(counters(before.families));
  });
});

/**
 * PromQL's metric names: what is left of an expression after removing strings, label matchers,
 * ranges and grouping clauses, minus function names (followed by a parenthesis) and keywords.
 */
function metricNamesIn(expr: string): string[] {
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const keywords = new Set(['and', 'or', 'unless', 'bool', 'offset', 'inf', 'nan']);
  const names: string[] = [];
  for (const m of stripped.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    if (m.index > 0 && /[0-9.]/.test(stripped[m.index - 1]!)) continue; // an exponent, as in 1e3
    if (stripped.slice(m.index + m[0].length).trimStart().startsWith('(')) continue;
    if (keywords.has(m[0].toLowerCase())) continue;
    names.push(m[0]);
  }
  return names;
}

describe('ops/ references only exported metrics', () => {
  const ruleExprs = [...rulesText.matchAll(/^\s*expr:\s*(.+)$/gm)].map((m) => m[1]!.trim());
  const dashboard = JSON.parse(grafanaText) as { panels: Array<{ title: string; targets: Array<{ expr?: string; rawSql?: string }> }> };
  const dashboardExprs = dashboard.panels.flatMap((p) => p.targets.filter((t) => t.expr).map((t) => t.expr!));

  it('finds an expression in every rule and in every Prometheus panel', () => {
    expect(ruleExprs.length).toBe([...rulesText.matchAll(/^\s*- alert:/gm)].length);
    expect(ruleExprs.length).toBeGreaterThanOrEqual(3);
    expect(rulesText).toMatch(/alert: StarbaseJobStuck/);
    expect(rulesText).toMatch(/alert: StarbaseCronNotRunning/);
    expect(rulesText).toMatch(/alert: StarbasePoisonJobs/);
    expect(rulesText).toMatch(/alert: StarbaseJobPastDeadline\n\s+expr: max by \(type, severity\) \(starbase_jobs_past_deadline\) > 0\n\s+labels:\n(\s+#.*\n)?\s+severity: "\{\{ \$labels.severity \}\}"/);
    expect(dashboardExprs).toContain('sum by (type, severity) (starbase_jobs_past_deadline) > 0');
    expect(dashboardExprs.length).toBeGreaterThanOrEqual(10);
    expect(metricNamesIn('histogram_quantile(0.95, sum by (le, type) (rate(starbase_step_duration_seconds_bucket{type!="x"}[5m]))) > 1e3'))
      .toEqual(['starbase_step_duration_seconds_bucket']);
  });

  it('every metric the rules and the Grafana dashboard name is in a scrape', async () => {
    const { families } = await scrape();
    // a histogram family declares its _bucket, _sum and _count series
    const exported = new Set(families.flatMap((f) => (f.type === 'histogram' ? ['_bucket', '_sum', '_count'].map((s) => f.name + s) : [f.name])));
    const referenced = [...ruleExprs, ...dashboardExprs].flatMap(metricNamesIn);
    expect(referenced.length).toBeGreaterThan(10);
    expect([...new Set(referenced)].filter((n) => !exported.has(n))).toEqual([]);
  });
});
