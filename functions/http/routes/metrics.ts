import { createRoute, z } from '@hono/zod-openapi';
import { DEADLINE_SEVERITIES, JOB_STATUSES, readMetrics, type Queryable } from '../../../queue/index.ts';
import { ALERT_KINDS } from '../../lib/alert-kinds.ts';
import { CONTENT_TYPE, histogramSamples, renderMetrics, type MetricFamily, type Sample } from '../../lib/prometheus.ts';
import { requireScope } from '../auth.ts';
import { invocationOf } from '../context.ts';
import { AUTH_ERRORS, bearer, createRouter, errorAnswers, mount } from '../openapi.ts';

export { ALERT_KINDS } from '../../lib/alert-kinds.ts';

const seconds = (d: Date | null | undefined) => (d ? d.getTime() / 1000 : NaN);
const num = (v: unknown) => Number(v ?? 0);
/** The statuses a job in progress can have; each type gets both, 0 included, so a rule sees the series before it moves. */
const IN_PROGRESS_STATUSES = ['running', 'queued'] as const;

/**
 * Every number comes from Postgres at scrape time (the engine's metrics read model, readMetrics),
 * so any invocation of the fleet answers the same; this maps it to Prometheus families.
 */
export async function collectMetrics(sql: Queryable, options: { stuckJobMs: number }): Promise<MetricFamily[]> {
  const m = await readMetrics(sql, { stuckJobMs: options.stuckJobMs });
  const typeNames = m.types;
  const le = m.stepBounds;
  const byStatus = (status: string) => m.depth.filter((r) => r.status === status).reduce((n, r) => n + r.n, 0);
  const countersOf = (counter: string): Sample[] =>
    typeNames.map((type) => ({ labels: { type }, value: num(m.counters.find((c) => c.type === type && c.counter === counter)?.n) }));

  const histogram: Sample[] = [];
  for (const type of [...new Set(m.steps.map((s) => s.type))]) {
    const rows = m.steps.filter((s) => s.type === type);
    const counts = le.map(() => 0).concat(0);
    for (const r of rows) counts[r.bucket] = (counts[r.bucket] ?? 0) + r.steps;
    histogram.push(...histogramSamples({ type }, le, counts, rows.reduce((n, r) => n + r.seconds, 0)));
  }
  const stepTotals = new Map<string, { type: string; outcome: string; n: number }>();
  for (const r of m.steps) {
    const key = `${r.type}\u0000${r.outcome}`;
    const t = stepTotals.get(key) ?? { type: r.type, outcome: r.outcome, n: 0 };
    t.n += r.steps;
    stepTotals.set(key, t);
  }
  const alertKinds = [...new Set([...ALERT_KINDS, ...m.alerts.map((a) => a.kind)])];
  const lease = m.leader;

  return [
    { name: 'starbase_jobs', help: 'Jobs by status and type (rows currently retained).', type: 'gauge',
      samples: m.depth.map((r) => ({ labels: { status: r.status, type: r.type }, value: r.n })) },
    { name: 'starbase_queue_depth', help: 'Jobs by status, all types.', type: 'gauge',
      samples: JOB_STATUSES.map((status) => ({ labels: { status }, value: byStatus(status) })) },
    { name: 'starbase_jobs_in_progress', help: 'Jobs started and not finished, by type and status: running, or queued (waiting between steps or for a retry).', type: 'gauge',
      samples: [...new Set([...typeNames, ...m.inProgress.map((r) => r.type)])].flatMap((type) => IN_PROGRESS_STATUSES.map((status) => ({
        labels: { type, status }, value: num(m.inProgress.find((r) => r.type === type && r.status === status)?.n) }))) },
    { name: 'starbase_jobs_due', help: 'Queued jobs that are due: waiting for a runner.', type: 'gauge', samples: [{ value: m.due }] },
    { name: 'starbase_oldest_queued_job_age_seconds', help: 'How long the oldest due queued job has waited since its run_at (0 when none).', type: 'gauge',
      samples: [{ value: m.oldestQueuedSeconds }] },
    { name: 'starbase_oldest_running_job_age_seconds', help: 'How long the longest-running step has run (0 when none).', type: 'gauge',
      samples: [{ value: m.oldestRunningSeconds }] },
    { name: 'starbase_stuck_jobs', help: 'Jobs whose current step has run longer than the stuck threshold.', type: 'gauge',
      samples: typeNames.map((type) => ({ labels: { type }, value: num(m.stuck.find((s) => s.type === type)?.n) })) },
    { name: 'starbase_jobs_past_deadline', help: 'Jobs past their deadline (enqueue + deadlineMs, the job\'s or its type\'s) and not ended, by type and severity.', type: 'gauge',
      samples: typeNames.flatMap((type) => DEADLINE_SEVERITIES.map((severity) => ({
        labels: { type, severity }, value: num(m.pastDeadline.find((p) => p.type === type && p.severity === severity)?.n) }))) },
    { name: 'starbase_claims_paused', help: 'Paused job types and pools (1 each): claims skip them until resumed (npm run ops -- inspect says who and why).', type: 'gauge',
      samples: m.pauses.map((p) => ({ labels: { kind: p.kind, name: p.name }, value: 1 })) },
    { name: 'starbase_rate_limit_window_starts', help: "Steps of each rate key started in its current window (its limit is starbase_rate_limit_limit).", type: 'gauge',
      samples: m.rateLimits.map((r) => ({ labels: { key: r.key }, value: r.startedInWindow })) },
    { name: 'starbase_rate_limit_limit', help: 'Each rate key\'s limit: steps per window.', type: 'gauge',
      samples: m.rateLimits.map((r) => ({ labels: { key: r.key }, value: r.limit })) },
    { name: 'starbase_rate_limit_paused', help: "1 while a provider's 429 pauses the rate key (claims skip its jobs until its Retry-After).", type: 'gauge',
      samples: m.rateLimits.map((r) => ({ labels: { key: r.key }, value: r.pausedUntil ? 1 : 0 })) },
    { name: 'starbase_stuck_job_threshold_seconds', help: 'The stuck threshold (STUCK_JOB_MS).', type: 'gauge', samples: [{ value: options.stuckJobMs / 1000 }] },
    { name: 'starbase_step_duration_seconds', help: 'Step durations by job type, from claim to settle.', type: 'histogram', samples: histogram },
    { name: 'starbase_steps_total', help: 'Steps by job type and outcome (done, continued, retried, failed, cancelled, released, lost).', type: 'counter',
      samples: [...stepTotals.values()].map((t) => ({ labels: { type: t.type, outcome: t.outcome }, value: t.n })) },
    { name: 'starbase_job_retries_total', help: 'Step errors that were retried.', type: 'counter', samples: countersOf('retry') },
    { name: 'starbase_poison_jobs_total', help: 'Jobs the engine failed: attempts used up, a permanent error, or a lease lost on the final attempt.', type: 'counter',
      samples: countersOf('poison') },
    { name: 'starbase_oom_killed_jobs_total', help: 'Jobs that crashed at the top weight class.', type: 'counter', samples: countersOf('oom_killed') },
    { name: 'starbase_schedule_last_success_timestamp_seconds', help: 'When each schedule last had a slot succeed (absent until one has).', type: 'gauge',
      samples: m.schedules.filter((s) => s.lastSuccessAt).map((s) => ({ labels: { schedule: s.name }, value: seconds(s.lastSuccessAt) })) },
    { name: 'starbase_schedule_missed', help: '1 while a schedule has a slot that did not succeed within its grace (the dead-man alert is open).', type: 'gauge',
      samples: m.schedules.map((s) => ({ labels: { schedule: s.name }, value: s.missed ? 1 : 0 })) },
    { name: 'starbase_tick_last_run_timestamp_seconds', help: "When the leader's tick last ran its maintenance (0 if never).", type: 'gauge',
      samples: [{ value: m.lastTickAt ? seconds(m.lastTickAt) : 0 }] },
    { name: 'starbase_leader_generation', help: 'Generation of the leader lease: +1 at every acquisition.', type: 'gauge', samples: [{ value: lease.generation }] },
    { name: 'starbase_leader_info', help: 'The leader lease holder (value 1).', type: 'gauge', samples: [{ labels: { holder: lease.holder ?? '' }, value: 1 }] },
    { name: 'starbase_leader_lease_expires_timestamp_seconds', help: 'When the leader lease expires unless renewed (0 if never held).', type: 'gauge',
      samples: [{ value: lease.expiresAt ? seconds(lease.expiresAt) : 0 }] },
    { name: 'starbase_alerts_total', help: 'Alerts opened, by kind.', type: 'counter',
      samples: alertKinds.map((kind) => ({ labels: { kind }, value: num(m.alerts.find((a) => a.kind === kind)?.fired) })) },
    { name: 'starbase_alerts_open', help: 'Alerts open now, by kind.', type: 'gauge',
      samples: alertKinds.map((kind) => ({ labels: { kind }, value: num(m.alerts.find((a) => a.kind === kind)?.open) })) },
  ];
}

export const metrics = createRouter();

mount(metrics, createRoute({
  method: 'get', path: '/metrics', tags: ['operator'], security: bearer, summary: 'Prometheus metrics, read from Postgres at scrape time',
  middleware: [requireScope('metrics')],
  responses: { 200: { description: 'Prometheus text exposition format', content: { [CONTENT_TYPE]: { schema: z.string() } } }, ...errorAnswers(...AUTH_ERRORS) },
}), async (c) => {
  const inv = await invocationOf(c);
  const families = await collectMetrics(inv.sql, { stuckJobMs: inv.config.stuckJobMs });
  return c.body(renderMetrics(families), 200, { 'content-type': CONTENT_TYPE, 'cache-control': 'no-store' });
});
