import type postgres from 'postgres';

/** What every benchmarked queue implements, so burn-down and steady treat them alike. */

export interface BenchSettings {
  /** Database connections the system's workers may hold (the producer in steady mode has its own). */
  connections: number;
  /** Jobs in flight at once, across all of the system's workers. */
  concurrency: number;
  /** Jobs claimed per fetch by one worker loop, where the system lets a loop claim a batch. */
  batch: number;
  /** How often an idle worker looks for new work, where the system polls (ms). */
  idlePollMs: number;
}

/** Connections of the steady-mode producer, apart from the workers' (the same for every system). */
export const PRODUCER_CONNECTIONS = 4;

/** A no-op job's payload: in steady mode, when it was enqueued (performance.now() of this process). */
export interface NoopPayload {
  t?: number;
}

export interface BenchSystem {
  /** Short name used in the table and results.json. */
  name: string;
  /** Package version (or a description for the floor). */
  version: string;
  /** How the system is configured, for the report. */
  describe(settings: BenchSettings): string;
  /**
   * Install the system's schema into an empty database. Untimed. With `retention`, the instance
   * also runs the system's own deletion of finished jobs as it does in production (sustained mode).
   */
  install(url: string, settings: BenchSettings, retention?: RetentionSettings): Promise<SystemInstance>;
}

/**
 * Sustained mode: each system's deletion of finished jobs, compressed in time so that it runs
 * many times within a minute's run. Systems that delete at completion (graphile-worker) ignore it.
 */
export interface RetentionSettings {
  /** Keep finished jobs (and, for ours, their events) this long. */
  retentionSeconds: number;
  /** Run the system's maintenance (ours: prune + roll-up; pg-boss: supervise/maintain) this often. */
  intervalSeconds: number;
}

export interface SystemInstance {
  /** Pre-queue `n` no-op jobs the fastest way the system offers. Untimed. */
  enqueueBulk(n: number): Promise<void>;
  /**
   * Open the producer (steady mode): its own connections, apart from the workers' pool. The
   * function it returns enqueues one job the way an application does.
   */
  openProducer(): Promise<(payload: NoopPayload) => Promise<void>>;
  /**
   * Open a producer that enqueues many jobs per call with the system's own bulk API (sustained
   * mode), on its own connections like openProducer's.
   */
  openBulkProducer(): Promise<(payloads: NoopPayload[]) => Promise<void>>;
  /** Rows the system still holds for its jobs (and their events, where it keeps any): shows deletion ran. */
  rowsLeft(probe: postgres.Sql): Promise<RowsLeft>;
  /** Start the workers; `onJob` runs as each job's handler starts. */
  startWorkers(onJob: (payload: NoopPayload) => void): Promise<void>;
  /** How many jobs are not yet settled (completed) in the database, read on the bench's probe connection or the system's own. */
  unsettled(probe: postgres.Sql): Promise<number>;
  /** Stop the workers (waiting for in-flight work) and close every connection. */
  close(): Promise<void>;
}

export interface RowsLeft {
  jobs: number;
  /** Event (history) rows, for a system that keeps them apart from the jobs. */
  events?: number;
}

/**
 * For systems built from independent claim loops (a loop claims a batch, runs it, settles it):
 * enough loops to hold `concurrency` jobs in batches of `batch`, at most one per connection.
 */
export function loopsFor(s: BenchSettings): { loops: number; perLoop: number } {
  const loops = Math.max(1, Math.min(s.connections, Math.ceil(s.concurrency / s.batch)));
  return { loops, perLoop: Math.max(1, Math.floor(s.concurrency / loops)) };
}

/** The `n` of a one-row count query, for systems whose tables the bench reads directly. */
export async function countRow(probe: postgres.Sql, query: string): Promise<number> {
  const [row] = await probe.unsafe(query);
  return Number(row?.n);
}
