import { Hono } from 'hono';
import { JOB_STATUSES, readLeaderLease, type Queryable } from '../../queue/index.ts';
import { ALERT_KINDS } from '../lib/alert-kinds.ts';
import { CONTENT_TYPE, histogramSamples, renderMetrics, type MetricFamily, type Sample } from '../lib/prometheus.ts';
import { requireScope } from './auth.ts';
import { invocationOf, type AppEnv } from './context.ts';

export { ALERT_KINDS } from '../lib/alert-kinds.ts';

const seconds = (d: Date | null | undefined) => (d ? d.getTime() / 1000 : NaN);
const num = (v: unknown) => Number(v ?? 0);

/**
 * Every number comes from Postgres at scrape time, so any invocation of the fleet answers the
 * same: gauges from the rows, counters and the step histogram from the roll-up of job_events
 * (worker.current_step_stats / current_job_counters add the tail not rolled up yet).
 */
export async function collectMetrics(sql: Queryable, options: { stuckJobMs: number }): Promise<MetricFamily[]> {
  // Keep the tail short for the readers below; skipped when another roll-up holds the row.
  await sql`select worker.rollup_job_events()`;
  const [types, depth, ages, stuck, bounds, steps, counters, schedules, lease, alerts, tick] = await Promise.all([
    sql`select type from worker.job_types order by type`,
    sql`select status, type, count(*)::int as n from worker.jobs group by 1, 2 order by 1, 2`,
    sql`select (select count(*)::int from worker.jobs where status = 'queued' and run_at <= now()) as due,
               (select coalesce(extract(epoch from now() - min(run_at)), 0)::float8 from worker.jobs where status = 'queued' and run_at <= now()) as oldest_queued,
               (select coalesce(extract(epoch from now() - min(claimed_at)), 0)::float8 from worker.jobs where status = 'running') as oldest_running`,
    sql`select type, count(*)::int as n from worker.jobs
         where status = 'running' and claimed_at < now() - make_interval(secs => ${options.stuckJobMs}::bigint / 1000.0)
         group by type`,
    sql`select unnest(worker.step_duration_bounds()) as le`,
    sql`select type, outcome, bucket, steps::float8 as steps, seconds from worker.current_step_stats() order by type, outcome, bucket`,
    sql`select type, counter, n::float8 as n from worker.current_job_counters()`,
    sql`select s.name, s.last_success_at,
               exists (select 1 from worker.alerts a where a.kind = 'schedule_missed' and a.key = s.name and a.resolved_at is null) as missed
          from worker.schedules s order by s.name`,
    readLeaderLease(sql),
    sql`select kind, count(*)::int as fired, count(*) filter (where resolved_at is null)::int as open from worker.alerts group by kind`,
    sql`select max(at) as at from worker.depth_snapshots`,
  ]);

  const typeNames = types.map((t) => t.type as string);
  const le = bounds.map((b) => Number(b.le));
  const byStatus = (status: string) => depth.filter((r) => r.status === status).reduce((n, r) => n + (r.n as number), 0);
  const countersOf = (counter: string): Sample[] =>
    typeNames.map((type) => ({ labels: { type }, value: num(counters.find((c) => c.type === type && c.counter === counter)?.n) }));

  const histogram: Sample[] = [];
  for (const type of [...new Set(steps.map((s) => s.type as string))]) {
    const rows = steps.filter((s) => s.type === type);
    const counts = le.map(() => 0).concat(0);
    for (const r of rows) counts[r.bucket as number]! += r.steps as number;
    histogram.push(...histogramSamples({ type }, le, counts, rows.reduce((n, r) => n + (r.seconds as number), 0)));
  }
  const stepTotals = new Map<string, { type: string; outcome: string; n: number }>();
  for (const r of steps) {
    const key = `${r.type}\u0000${r.outcome}`;
    const t = stepTotals.get(key) ?? { type: r.type as string, outcome: r.outcome as string, n: 0 };
    t.n += r.steps as number;
    stepTotals.set(key, t);
  }
  const alertKinds = [...new Set([...ALERT_KINDS, ...alerts.map((a) => a.kind as string)])];

  return [
    { name: 'starbase_jobs', help: 'Jobs by status and type (rows currently retained).', type: 'gauge',
      samples: depth.map((r) => ({ labels: { status: r.status as string, type: r.type as string }, value: r.n as number })) },
    { name: 'starbase_queue_depth', help: 'Jobs by status, all types.', type: 'gauge',
      samples: JOB_STATUSES.map((status) => ({ labels: { status }, value: byStatus(status) })) },
    { name: 'starbase_jobs_due', help: 'Queued jobs that are due: waiting for a runner.', type: 'gauge', samples: [{ value: num(ages[0]!.due) }] },
    { name: 'starbase_oldest_queued_job_age_seconds', help: 'How long the oldest due queued job has waited since its run_at (0 when none).', type: 'gauge',
      samples: [{ value: num(ages[0]!.oldest_queued) }] },
    { name: 'starbase_oldest_running_job_age_seconds', help: 'How long the longest-running step has run (0 when none).', type: 'gauge',
      samples: [{ value: num(ages[0]!.oldest_running) }] },
    { name: 'starbase_stuck_jobs', help: 'Jobs whose current step has run longer than the stuck threshold.', type: 'gauge',
      samples: typeNames.map((type) => ({ labels: { type }, value: num(stuck.find((s) => s.type === type)?.n) })) },
    { name: 'starbase_stuck_job_threshold_seconds', help: 'The stuck threshold (STUCK_JOB_MS).', type: 'gauge', samples: [{ value: options.stuckJobMs / 1000 }] },
    { name: 'starbase_step_duration_seconds', help: 'Step durations by job type, from claim to settle.', type: 'histogram', samples: histogram },
    { name: 'starbase_steps_total', help: 'Steps by job type and outcome (done, continued, retried, failed, cancelled, released, lost).', type: 'counter',
      samples: [...stepTotals.values()].map((t) => ({ labels: { type: t.type, outcome: t.outcome }, value: t.n })) },
    { name: 'starbase_job_retries_total', help: 'Step errors that were retried.', type: 'counter', samples: countersOf('retry') },
    { name: 'starbase_poison_jobs_total', help: 'Jobs the engine failed: attempts used up, a permanent error, or a lease lost on the final attempt.', type: 'counter',
      samples: countersOf('poison') },
    { name: 'starbase_oom_killed_jobs_total', help: 'Jobs that crashed at the top weight class.', type: 'counter', samples: countersOf('oom_killed') },
    { name: 'starbase_schedule_last_success_timestamp_seconds', help: 'When each schedule last had a slot succeed (absent until one has).', type: 'gauge',
      samples: schedules.filter((s) => s.last_success_at).map((s) => ({ labels: { schedule: s.name as string }, value: seconds(s.last_success_at as Date) })) },
    { name: 'starbase_schedule_missed', help: '1 while a schedule has a slot that did not succeed within its grace (the dead-man alert is open).', type: 'gauge',
      samples: schedules.map((s) => ({ labels: { schedule: s.name as string }, value: s.missed ? 1 : 0 })) },
    { name: 'starbase_tick_last_run_timestamp_seconds', help: "When the leader's tick last ran its maintenance (0 if never).", type: 'gauge',
      samples: [{ value: tick[0]?.at ? seconds(tick[0].at as Date) : 0 }] },
    { name: 'starbase_leader_generation', help: 'Generation of the leader lease: +1 at every acquisition.', type: 'gauge', samples: [{ value: lease.generation }] },
    { name: 'starbase_leader_info', help: 'The leader lease holder (value 1).', type: 'gauge', samples: [{ labels: { holder: lease.holder ?? '' }, value: 1 }] },
    { name: 'starbase_leader_lease_expires_timestamp_seconds', help: 'When the leader lease expires unless renewed (0 if never held).', type: 'gauge',
      samples: [{ value: lease.expiresAt ? seconds(lease.expiresAt) : 0 }] },
    { name: 'starbase_alerts_total', help: 'Alerts opened, by kind.', type: 'counter',
      samples: alertKinds.map((kind) => ({ labels: { kind }, value: num(alerts.find((a) => a.kind === kind)?.fired) })) },
    { name: 'starbase_alerts_open', help: 'Alerts open now, by kind.', type: 'gauge',
      samples: alertKinds.map((kind) => ({ labels: { kind }, value: num(alerts.find((a) => a.kind === kind)?.open) })) },
  ];
}

export const metrics = new Hono<AppEnv>();

metrics.get('/metrics', requireScope('metrics'), async (c) => {
  const inv = await invocationOf(c);
  const families = await collectMetrics(inv.sql, { stuckJobMs: inv.config.stuckJobMs });
  return c.body(renderMetrics(families), 200, { 'content-type': CONTENT_TYPE, 'cache-control': 'no-store' });
});
