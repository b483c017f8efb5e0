import type { Queryable } from './db.ts';
import { readLeaderLease } from './leader.ts';
import type { JobStatus } from './job.ts';
import { rollupJobEvents } from './upkeep.ts';

/**
 * The metrics read model: every number read from Postgres at once, so any reader of the fleet
 * sees the same. Counters and the step histogram come from the roll-up of job_events
 * (worker.current_step_stats / current_job_counters add the tail not rolled up yet).
 */
export interface MetricsSnapshot {
  /** Every registered job type, sorted. */
  types: string[];
  /** Jobs by status and type (rows currently retained). */
  depth: { status: JobStatus; type: string; n: number }[];
  /** Queued jobs that are due. */
  due: number;
  /** Seconds the oldest due queued job has waited since its run_at (0 when none). */
  oldestQueuedSeconds: number;
  /** Seconds the longest-running step has run (0 when none). */
  oldestRunningSeconds: number;
  /** Running jobs past the stuck threshold, by type (types with none absent). */
  stuck: { type: string; n: number }[];
  /** The step duration histogram's upper bounds, in seconds. */
  stepBounds: number[];
  /** Step counts and total seconds by type, outcome and histogram bucket (an index into stepBounds; one past for +Inf). */
  steps: { type: string; outcome: string; bucket: number; steps: number; seconds: number }[];
  /** Per-type counters: retry, poison, oom_killed. */
  counters: { type: string; counter: string; n: number }[];
  schedules: { name: string; lastSuccessAt: Date | null; missed: boolean }[];
  leader: { holder: string | null; generation: number; expiresAt: Date | null };
  /** Alerts opened and open now, by kind. */
  alerts: { kind: string; fired: number; open: number }[];
  /** When the leader's tick last recorded the queue's depth; null if never. */
  lastTickAt: Date | null;
}

export async function readMetrics(sql: Queryable, options: { stuckJobMs: number; now?: Date }): Promise<MetricsSnapshot> {
  const now = sql`coalesce(${options.now ?? null}::timestamptz, now())`;
  // Keep the tail short for the readers below; skipped when another roll-up holds the row.
  await rollupJobEvents(sql, options.now ? { now: options.now } : {});
  const [types, depth, ages, stuck, bounds, steps, counters, schedules, lease, alerts, tick] = await Promise.all([
    sql<{ type: string }[]>`select type from worker.job_types order by type`,
    sql<{ status: JobStatus; type: string; n: number }[]>`select status, type, count(*)::int as n from worker.jobs group by 1, 2 order by 1, 2`,
    sql<{ due: number; oldest_queued: number; oldest_running: number }[]>`
      select (select count(*)::int from worker.jobs where status = 'queued' and run_at <= ${now}) as due,
             (select coalesce(extract(epoch from ${now} - min(run_at)), 0)::float8 from worker.jobs where status = 'queued' and run_at <= ${now}) as oldest_queued,
             (select coalesce(extract(epoch from ${now} - min(claimed_at)), 0)::float8 from worker.jobs where status = 'running') as oldest_running`,
    sql<{ type: string; n: number }[]>`select type, count(*)::int as n from worker.jobs
         where status = 'running' and claimed_at < ${now} - make_interval(secs => ${options.stuckJobMs}::bigint / 1000.0)
         group by type`,
    sql<{ le: number }[]>`select unnest(worker.step_duration_bounds()) as le`,
    sql<{ type: string; outcome: string; bucket: number; steps: number; seconds: number }[]>`
      select type, outcome, bucket, steps::float8 as steps, seconds from worker.current_step_stats() order by type, outcome, bucket`,
    sql<{ type: string; counter: string; n: number }[]>`select type, counter, n::float8 as n from worker.current_job_counters()`,
    sql<{ name: string; last_success_at: Date | null; missed: boolean }[]>`
      select s.name, s.last_success_at,
             exists (select 1 from worker.alerts a where a.kind = 'schedule_missed' and a.key = s.name and a.resolved_at is null) as missed
        from worker.schedules s order by s.name`,
    readLeaderLease(sql),
    sql<{ kind: string; fired: number; open: number }[]>`
      select kind, count(*)::int as fired, count(*) filter (where resolved_at is null)::int as open from worker.alerts group by kind`,
    sql<{ at: Date | null }[]>`select max(at) as at from worker.depth_snapshots`,
  ]);
  return {
    types: types.map((t) => t.type),
    depth: depth.map((r) => ({ status: r.status, type: r.type, n: r.n })),
    due: Number(ages[0]?.due ?? 0),
    oldestQueuedSeconds: Number(ages[0]?.oldest_queued ?? 0),
    oldestRunningSeconds: Number(ages[0]?.oldest_running ?? 0),
    stuck: stuck.map((s) => ({ type: s.type, n: s.n })),
    stepBounds: bounds.map((b) => Number(b.le)),
    steps: steps.map((s) => ({ type: s.type, outcome: s.outcome, bucket: s.bucket, steps: Number(s.steps), seconds: Number(s.seconds) })),
    counters: counters.map((c) => ({ type: c.type, counter: c.counter, n: Number(c.n) })),
    schedules: schedules.map((s) => ({ name: s.name, lastSuccessAt: s.last_success_at, missed: s.missed })),
    leader: { holder: lease.holder, generation: lease.generation, expiresAt: lease.expiresAt },
    alerts: alerts.map((a) => ({ kind: a.kind, fired: a.fired, open: a.open })),
    lastTickAt: tick[0]?.at ?? null,
  };
}
