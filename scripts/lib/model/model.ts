import type { EnqueueInput, Job } from '../../../queue/index.ts';
import { Flows, RATED_TYPE } from './flows.ts';

/**
 * The reference model of the engine's semantics used by the model-based concurrency test
 * (test/engine/model.test.ts): what a job is, when it is claimable, which limits bind, when two
 * submissions are the same request, and what may make a row disappear. It holds no SQL: the
 * driver (run.ts) feeds it the rows it reads after each round of concurrent operations, and the
 * checks (checks.ts) compare what the engine answered and wrote against these rules.
 */

/** A pool with a capacity row: the most weight its running jobs may add up to. */
export interface PoolSpec {
  name: string;
  maxRunningWeight: number;
}

export interface ModelConfig {
  pools: PoolSpec[];
  /** The limit of each concurrency key: every job of a key is enqueued with the same limit. */
  keyLimits: Record<string, number>;
  /** What a running job of each weight class counts against its pool (worker.weight_classes). */
  weightCost: Record<string, number>;
  /** The job type's lease. */
  leaseMs: number;
}

/** A lease a client was given by a claim. After a crash the client keeps it as a zombie. */
export interface Lease {
  jobId: string;
  token: string;
  lockedUntil: number;
  zombie: boolean;
}

/** The retention cutoffs of one prune pass. */
export interface PruneCutoffs {
  finished: number;
  failed: number;
  events: number;
}

export const TERMINAL = new Set(['done', 'failed', 'cancelled', 'oom_killed']);

/** What makes two submissions "the same request": everything but the time fields. */
export function requestIdentity(input: EnqueueInput): string {
  return JSON.stringify([
    input.type, input.payload ?? {}, input.priority ?? 50, input.maxAttempts ?? null, input.dedupeKey ?? null,
    input.pool ?? null, input.weight ?? null, input.concurrencyKey ?? null, input.concurrencyLimit ?? null,
  ]);
}

export function sameRequest(a: EnqueueInput, b: EnqueueInput): boolean {
  return requestIdentity(a) === requestIdentity(b);
}

export class Model {
  /** The shared pinned clock (ms): every operation of a round runs at this `now`. */
  clock: number;
  /** The rows as of the last read, by id. */
  jobs = new Map<string, Job>();
  /** Every id an enqueue answered, with what answered it (for messages). */
  answered = new Map<string, string>();
  /** Every id the engine ever showed: answered, or read from the table. */
  seen = new Set<string>();
  /** Ids that disappeared legitimately (pruned after their retention). */
  pruned = new Set<string>();
  /** Per submit key: the request whose job holds the key (the one answered as not a duplicate). */
  requests = new Map<string, EnqueueInput>();
  /** Per client: the leases it was given. */
  leases = new Map<number, Map<string, Lease>>();
  /** Waits, children and the rate key (flows.ts). */
  flows = new Flows();

  constructor(readonly config: ModelConfig, clock: number) {
    this.clock = clock;
  }

  now(): Date {
    return new Date(this.clock);
  }

  poolCapacity(pool: string | null): number {
    if (pool === null) return Infinity;
    return this.config.pools.find((p) => p.name === pool)?.maxRunningWeight ?? Infinity;
  }

  cost(weight: string): number {
    return this.config.weightCost[weight] ?? 1;
  }

  /** A running job whose lease has not run out: it counts against limits and nobody else may own it. */
  static live(job: Job, now: number): boolean {
    return job.status === 'running' && job.lockedUntil !== null && job.lockedUntil.getTime() >= now;
  }

  /** Running jobs with live leases per concurrency key, and their weight per pool. */
  usage(jobs: Iterable<Job>, now: number): { keys: Map<string, number>; pools: Map<string, number> } {
    const keys = new Map<string, number>();
    const pools = new Map<string, number>();
    for (const j of jobs) {
      if (!Model.live(j, now)) continue;
      if (j.concurrencyKey !== null) keys.set(j.concurrencyKey, (keys.get(j.concurrencyKey) ?? 0) + 1);
      if (j.runningPool !== null) pools.set(j.runningPool, (pools.get(j.runningPool) ?? 0) + this.cost(j.weight));
    }
    return { keys, pools };
  }

  /**
   * The jobs one claim by a runner of `pool` could take now, taken greedily in (priority, run_at)
   * order: due and queued, routed to this pool or to none, not waiting behind an active job of
   * its dedupe key, with room under its concurrency key's limit and under the pool's weight, and
   * for the rate-limited type room in the rate key's window and no pause.
   * Jobs whose lease ran out are not here: the rescue re-queues them first.
   */
  claimable(pool: string | null, now = this.clock): Job[] {
    const { keys, pools } = this.usage(this.jobs.values(), now);
    let budget = this.poolCapacity(pool) - (pool === null ? 0 : pools.get(pool) ?? 0);
    const active = new Set<string>();
    for (const j of this.jobs.values()) {
      if (j.dedupeKey !== null && j.startedAt !== null && (j.status === 'queued' || j.status === 'running')) active.add(j.dedupeKey);
    }
    const candidates = [...this.jobs.values()]
      .filter((j) => j.status === 'queued' && j.runAt.getTime() <= now && (j.pool === null || j.pool === pool))
      .filter((j) => j.dedupeKey === null || j.startedAt !== null || !active.has(j.dedupeKey))
      .sort((a, b) => a.priority - b.priority || a.runAt.getTime() - b.runAt.getTime());
    const taken: Job[] = [];
    let rateRoom = this.flows.rateRoom(now);
    for (const j of candidates) {
      if (this.cost(j.weight) > budget) continue;
      if (j.type === RATED_TYPE && rateRoom <= 0) continue;
      if (j.concurrencyKey !== null) {
        const limit = j.concurrencyLimit ?? Infinity;
        if ((keys.get(j.concurrencyKey) ?? 0) >= limit) continue;
        keys.set(j.concurrencyKey, (keys.get(j.concurrencyKey) ?? 0) + 1);
      }
      budget -= this.cost(j.weight);
      if (j.type === RATED_TYPE) rateRoom--;
      taken.push(j);
    }
    return taken;
  }

  /** Whether a prune pass with these cutoffs may delete this row. */
  static prunable(job: Job, cutoffs: PruneCutoffs): boolean {
    if (job.finishedAt === null) return false;
    const cutoff = job.status === 'failed' || job.status === 'oom_killed' ? cutoffs.failed : cutoffs.finished;
    return job.finishedAt.getTime() < cutoff;
  }

  /** The job that now holds a submit key, if it still exists. */
  holderOf(submitKey: string): Job | undefined {
    for (const j of this.jobs.values()) if (j.submitKey === submitKey) return j;
    return undefined;
  }

  leasesOf(client: number): Map<string, Lease> {
    let m = this.leases.get(client);
    if (!m) this.leases.set(client, (m = new Map()));
    return m;
  }

  /** Whether a lease is the job's current one (the row is running under its token). */
  current(lease: Lease): boolean {
    const j = this.jobs.get(lease.jobId);
    return j !== undefined && j.status === 'running' && j.leaseToken === lease.token;
  }

  /** Replace the rows with a fresh read; leases of rows that are gone are forgotten. */
  sync(rows: Job[]): void {
    this.jobs = new Map(rows.map((j) => [j.id, j]));
    for (const j of rows) this.seen.add(j.id);
    for (const held of this.leases.values()) {
      for (const [id] of held) if (!this.jobs.has(id)) held.delete(id);
    }
    for (const [key] of this.requests) if (!this.holderOf(key)) this.requests.delete(key);
  }
}
