// The runner's public shapes, in a module of their own so that the claim loop, the step and its
// lease share them without importing one another.
import type { Alerts } from '../alerts.ts';
import type { Backoff } from '../database-errors.ts';
import type { Sql } from '../db.ts';
import type { JobRegistry } from '../registry.ts';

export interface StepLogLine {
  at: string;
  jobId: string;
  type: string;
  step: string;
  outcome: StepOutcome;
  durationMs: number;
  attempt: number;
  error?: string;
  /** Times the step's settle was written again after a database blip (absent when none). */
  settleRetries?: number;
}

/** A claim the database refused for a blip, tried again after `retryInMs`: one line per retry. */
export interface ClaimRetryLine {
  level: 'warn';
  msg: 'claim failed, retrying';
  workerId: string;
  /** `contention` (deadlock, serialization failure, lock timeout) or `connection` (the database is unreachable). */
  kind: 'contention' | 'connection';
  code: string | undefined;
  error: string;
  /** Failed claims in a row, this one included. */
  failures: number;
  retryInMs: number;
  /** The finished steps' completions that rode with the claim: rolled back with it, each written again on its own. */
  completions: number;
}

export type StepOutcome = 'done' | 'continued' | 'retried' | 'failed' | 'cancelled' | 'lost' | 'released';

export interface Runner {
  sql: Sql;
  registry: JobRegistry;
  /** Stored in locked_by: the invocation or process. */
  workerId: string;
  pool?: string | null;
  alerts?: Alerts;
  /** Steps run at once (claimed in one batch). */
  concurrency?: number;
  /** One JSON-able line per step; never includes payloads. */
  log?: (line: StepLogLine) => void;
  /** Pinned clock for tests; the database clock when absent. */
  clock?: () => Date;
  /**
   * How long one claim round trip may go unanswered before runSteps gives up with an error
   * (default 30 s): postgres.js 3.4.9 can leave a query on a connection reset by a database
   * restart pending forever, which would wedge the runner instead of reporting the outage.
   */
  claimTimeoutMs?: number;
  /**
   * How long the database may stay unreachable (claims failing on the connection, or unanswered
   * within claimTimeoutMs) before runSteps gives up and throws the last error (default 60 s).
   * Contention never counts: the database answered, so the claim is retried for as long as it takes.
   */
  databaseGoneMs?: number;
  /** The waits between tries of a refused claim or settle (default 50 ms doubling to 2 s, with jitter). */
  retryBackoff?: Backoff;
  /** One line per claim retried after a blip. */
  warn?: (line: ClaimRetryLine) => void;
}

export interface RunOptions {
  /** Stop claiming after this long; in-flight steps finish. */
  budgetMs?: number;
  /** Stop after this many steps. */
  maxJobs?: number;
  /**
   * Asked before each claim: true stops claiming (in-flight steps finish), like a spent budget.
   * The Worker stops here before a per-invocation platform limit (subrequests, CPU) is reached.
   */
  stopClaiming?: () => boolean;
  /** Shutdown: stop claiming; in-flight steps get `graceMs`, then are aborted and their leases released. */
  signal?: AbortSignal;
  graceMs?: number;
  /**
   * When nothing is due: look again later (a long-running worker); absent: return. This is the
   * longest wait: right after work was found the runner looks again within 2 ms, doubling the wait
   * while claims come back empty, so a steady trickle of jobs starts fast and an idle runner polls
   * every idleWaitMs.
   */
  idleWaitMs?: number;
}

export type RunCounts = Record<StepOutcome, number> & { claimed: number };
