import type { Queryable } from '../db.ts';
import type { JobStatus } from '../job.ts';
import type { MetricsSnapshot } from '../metrics.ts';
import { at } from './clock.ts';
import { inProgressCondition } from './jobs.ts';
import { deadlineSeverityOrNull } from './rows.ts';

/**
 * The metrics read model's queries, run at once so one snapshot reads one state of the fleet.
 * Counters and the step histogram come from the roll-up of job_events (worker.current_step_stats
 * / current_job_counters add the tail not rolled up yet).
 */
export type MetricReadings = Omit<MetricsSnapshot, 'leader' | 'pauses' | 'rateLimits'>;

interface AgeRow {
  due: number;
  oldest_queued: number;
  oldest_running: number;
}

interface StepRow {
  type: string;
  outcome: string;
  bucket: number;
  steps: number;
  seconds: number;
}

export async function readMetricReadings(sql: Queryable, options: { stuckJobMs: number; now: Date | undefined }): Promise<MetricReadings> {
  const now = at(sql, options.now);
  const [types, depth, ages, stuck, pastDeadline, bounds, steps, counters, schedules, alerts, tick] = await Promise.all([
    sql<{ type: string }[]>`select type from worker.job_types order by type`,
    // One scan gives both: the depth and, of it, the rows in progress (queue/progress.ts).
    sql<{ status: JobStatus; type: string; n: number; in_progress: number }[]>`
      select status, type, count(*)::int as n, count(*) filter (where ${inProgressCondition(sql)})::int as in_progress
        from worker.jobs group by 1, 2 order by 1, 2`,
    sql<AgeRow[]>`
      select (select count(*)::int from worker.jobs where status = 'queued' and run_at <= ${now}) as due,
             (select coalesce(extract(epoch from ${now} - min(run_at)), 0)::float8 from worker.jobs where status = 'queued' and run_at <= ${now}) as oldest_queued,
             (select coalesce(extract(epoch from ${now} - min(claimed_at)), 0)::float8 from worker.jobs where status = 'running') as oldest_running`,
    sql<{ type: string; n: number }[]>`select type, count(*)::int as n from worker.jobs
         where status = 'running' and claimed_at < ${now} - make_interval(secs => ${options.stuckJobMs}::bigint / 1000.0)
         group by type`,
    // a range of jobs_deadline_idx: only jobs with a deadline that have not ended are in it
    sql<{ type: string; severity: string; n: number }[]>`select type, deadline_severity as severity, count(*)::int as n from worker.jobs
         where deadline_at <= ${now} and deadline_at is not null and status in ('queued', 'running')
         group by 1, 2`,
    sql<{ le: number }[]>`select unnest(worker.step_duration_bounds()) as le`,
    sql<StepRow[]>`
      select type, outcome, bucket, steps::float8 as steps, seconds from worker.current_step_stats() order by type, outcome, bucket`,
    sql<{ type: string; counter: string; n: number }[]>`select type, counter, n::float8 as n from worker.current_job_counters()`,
    sql<{ name: string; last_success_at: Date | null; missed: boolean }[]>`
      select s.name, s.last_success_at,
             exists (select 1 from worker.alerts a where a.kind = 'schedule_missed' and a.key = s.name and a.resolved_at is null) as missed
        from worker.schedules s order by s.name`,
    sql<{ kind: string; fired: number; open: number }[]>`
      select kind, count(*)::int as fired, count(*) filter (where resolved_at is null)::int as open from worker.alerts group by kind`,
    sql<{ at: Date | null }[]>`select max(at) as at from worker.depth_snapshots`,
  ]);
  return {
    types: types.map((t) => t.type),
    depth: depth.map((r) => ({ status: r.status, type: r.type, n: r.n })),
    inProgress: depth.filter((r) => r.in_progress > 0).map((r) => ({ status: r.status, type: r.type, n: r.in_progress })),
    due: Number(ages[0]?.due ?? 0),
    oldestQueuedSeconds: Number(ages[0]?.oldest_queued ?? 0),
    oldestRunningSeconds: Number(ages[0]?.oldest_running ?? 0),
    stuck: stuck.map((s) => ({ type: s.type, n: s.n })),
    pastDeadline: pastDeadline.map((p) => ({ type: p.type, severity: deadlineSeverityOrNull(p.severity, 'deadline_severity') ?? 'warning', n: p.n })),
    stepBounds: bounds.map((b) => Number(b.le)),
    steps: steps.map((s) => ({ type: s.type, outcome: s.outcome, bucket: s.bucket, steps: Number(s.steps), seconds: Number(s.seconds) })),
    counters: counters.map((c) => ({ type: c.type, counter: c.counter, n: Number(c.n) })),
    schedules: schedules.map((s) => ({ name: s.name, lastSuccessAt: s.last_success_at, missed: s.missed })),
    alerts: alerts.map((a) => ({ kind: a.kind, fired: a.fired, open: a.open })),
    lastTickAt: tick[0]?.at ?? null,
  };
}
