import type { Queryable } from './db.ts';

/** The tick's small maintenance calls into SQL, each one statement returning typed counts. */

/** Leader churn: more acquisitions of the lease than `maxChanges` within the window opens a leader_churn alert (worker.check_leader_churn). */
export async function checkLeaderChurn(
  sql: Queryable,
  options: { maxChanges: number; windowMs: number; now?: Date },
): Promise<{ opened: number; resolved: number }> {
  const [row] = await sql<{ opened: number; resolved: number }[]>`
    select opened, resolved from worker.check_leader_churn(${options.maxChanges}, ${options.windowMs}, ${options.now ?? null}::timestamptz)`;
  return { opened: row?.opened ?? 0, resolved: row?.resolved ?? 0 };
}

/**
 * Fold the settled tail of worker.job_events into the step and job counters; returns the events
 * rolled up (0 when another roll-up holds the row).
 */
export async function rollupJobEvents(sql: Queryable, options: { now?: Date } = {}): Promise<number> {
  const [row] = await sql<{ n: number }[]>`select worker.rollup_job_events(p_now => ${options.now ?? null}::timestamptz) as n`;
  return row?.n ?? 0;
}

/** Record the queue's depth at `at` (the dashboard's depth chart). */
export async function recordDepthSnapshot(sql: Queryable, at: Date): Promise<void> {
  await sql`select worker.record_depth_snapshot(${at})`;
}

/**
 * Milliseconds until the next queued job runnable by `pool` falls due (≤ 0: due now); null when
 * nothing is queued.
 */
export async function nextDueInMs(sql: Queryable, pool: string, options: { now?: Date } = {}): Promise<number | null> {
  const [row] = await sql<{ due_in_ms: number | null }[]>`
    -- null when nothing is queued (greatest() would turn the null into 0). A parked job's run_at
    -- is 'infinity' and never falls due: it is left out, because Postgres 15 and 16 raise
    -- "cannot subtract infinite timestamps" on 'infinity' - now() (17 returns an infinite interval).
    select (extract(epoch from min(run_at) - coalesce(${options.now ?? null}::timestamptz, now())) * 1000)::float8 as due_in_ms
      from worker.jobs
     where status = 'queued' and run_at < 'infinity' and (pool is null or pool = ${pool})`;
  return row?.due_in_ms ?? null;
}
