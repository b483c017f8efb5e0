import { z } from 'zod';
import { defineJobType, done, JobRegistry, type Job } from '../../../queue/index.ts';
import type { HistoryEvent } from '../history.ts';

/**
 * The model's rules for the engine's flows, beside the plain job lifecycle of model.ts: waits for
 * signals (a step ends in waitFor, events end it), child jobs with a join (a step spawns, the
 * parent is parked until the join holds) and a rate key (no window of `per` holds more than
 * `limit` step starts; a provider's 429 pauses the key). It holds what the clients learnt from
 * the engine's answers (kept events, each spawn's children, the key's starts and pauses) and the
 * history as it was read after each round, so pruning never hides an earlier event from the
 * whole-history checks (flow-checks.ts).
 */

/** The model's rate-limited job type: synced into the database by the run, claimed like any. */
export const RATED_TYPE = 'model_rated';
export const RATE = { key: 'model:provider', limit: 3, perMs: 10_000 } as const;

export const modelRegistry = new JobRegistry([
  defineJobType({
    type: RATED_TYPE,
    payload: z.object({ text: z.string() }),
    rateLimit: { key: RATE.key, limit: RATE.limit, per: RATE.perMs },
    run: async () => done(),
  }),
]);

/** The event names and correlation keys the generator draws from: small, so they collide. */
export const EVENT_NAMES = ['e0', 'e1'] as const;
export const EVENT_KEYS = ['x', 'y'] as const;
/** A name only waits use (signals reach it only when aimed at such a wait): its waits mostly time out. */
export const QUIET_EVENT = 'quiet';

/** What a job waits for, from its checkpoint (`$wait`, written by worker.wait_for). */
export interface WaitSpec {
  name: string;
  /** '' for a wait without a key: the channel worker.signal matches it on. */
  key: string;
  step: string;
  timeoutAt: number | null;
}

/** An event no wait took, kept by the engine for the next wait on it (its answer's keptEventId). */
export interface KeptEvent {
  id: number;
  /** The event's payload.n: every event the generator sends is numbered. */
  n: number;
  name: string;
  key: string;
  /** Sent to this job (signalJob); null for (name, key) (sendEvent). */
  jobId: string | null;
  /** The model's clock when the engine kept it (a prune drops it past keptSignalRetentionMs). */
  at: number;
}

/** One spawn: its children in the order given and how many must end. */
export interface Family {
  parentId: string;
  waitNo: number;
  children: string[];
  need: number;
  /** When the model first saw the join hold (after that nothing may change the wait). */
  joinedAt: number | null;
}

/** How often a history reached each case of the flows (the test asserts each was reached). */
export const COVERAGE = [
  'waits', 'deliveries', 'kept', 'keptTaken', 'racingSignals', 'timedOut', 'spawns', 'joins', 'resumedReads', 'childFailed',
  'parentCancelReachedRunning', 'childEndedAtParentCancel', 'ratePauses', 'rateWindowFull',
] as const;
export type CoverageCase = (typeof COVERAGE)[number];

export class Flows {
  coverage = Object.fromEntries(COVERAGE.map((c) => [c, 0])) as Record<CoverageCase, number>;
  kept = new Map<number, KeptEvent>();
  /** Every kept event ever taken (a second take of one is a double delivery). */
  taken = new Set<number>();
  /** Per parent: its spawns in order. */
  families = new Map<string, Family[]>();
  parentOf = new Map<string, string>();
  /** Children that were running when their parent's cancel reached them: their step may still end them done. */
  runningAtCancel = new Set<string>();
  /** Jobs an operator requeued (a bulk retry): their families' joins and cancels are the operator's to reason about. */
  requeued = new Set<string>();
  /** Children that have been seen ended (a pruned child still counts). */
  ended = new Set<string>();
  /** Step starts of the rate key, from the claims' answers (ms). */
  starts: number[] = [];
  /** The 429 pauses of the rate key: [from, until). */
  pauses: Array<{ from: number; until: number }> = [];
  pausedUntil = -Infinity;
  /** The history as read after every round (ids increase; nothing pruned from here). */
  events: HistoryEvent[] = [];
  lastEventId = 0;

  /** Starts of the key in the window of `per` that ends at `now` (the claim counts s >= now - per). */
  startsInWindow(now: number): number {
    return this.starts.filter((s) => s >= now - RATE.perMs).length;
  }

  /** How many steps of the rate key a claim at `now` may start. */
  rateRoom(now: number): number {
    return this.pausedUntil > now ? 0 : RATE.limit - this.startsInWindow(now);
  }

  latestFamily(parentId: string): Family | undefined {
    return this.families.get(parentId)?.at(-1);
  }

  /** Whether job `id` is `ancestor` or one of its descendants. */
  descends(id: string, ancestor: string): boolean {
    for (let at: string | undefined = id, depth = 0; at !== undefined && depth < 40; at = this.parentOf.get(at), depth++) {
      if (at === ancestor) return true;
    }
    return false;
  }

  /** Whether an operator requeued the parent or a child of `family` (so far, or in `fresh`). */
  requeuedIn(family: { parentId: string; children: string[] }, fresh: HistoryEvent[]): boolean {
    const requeued = (id: string) => this.requeued.has(id) || fresh.some((e) => e.job_id === id && e.kind === 'requeued');
    return requeued(family.parentId) || family.children.some(requeued);
  }

  /** A family's ended children: terminal in `rows`, or seen ended before (and maybe pruned since). */
  endedOf(family: Family, rows: Map<string, Job>): number {
    return family.children.filter((c) => this.ended.has(c) || isTerminal(rows.get(c))).length;
  }
}

export const isTerminal = (j: Job | undefined) => j !== undefined && ['done', 'failed', 'cancelled', 'oom_killed'].includes(j.status);

/** The wait a queued job is parked on, when its checkpoint shows one not yet ended. */
export function waitOf(job: Job | undefined): WaitSpec | null {
  if (!job || job.status !== 'queued') return null;
  const w = job.checkpoint.$wait as { name?: string; key?: string | null; step?: string; timeoutAt?: string | null } | undefined;
  if (!w || typeof w !== 'object' || w.step !== job.step || '$event' in job.checkpoint) return null;
  return { name: String(w.name), key: w.key ?? '', step: String(w.step), timeoutAt: w.timeoutAt ? new Date(w.timeoutAt).getTime() : null };
}

/** A wait that takes an event at `now`: parked, no cancel pending, its timeout not passed (worker.wait_is_open). */
export function openWait(job: Job | undefined, now: number): WaitSpec | null {
  const w = waitOf(job);
  if (!w || job!.cancelRequestedAt !== null) return null;
  return w.timeoutAt === null || w.timeoutAt > now ? w : null;
}

/** Whether an event (name, key) for `jobId` (or for the channel when null) matches a wait. */
export function matches(wait: WaitSpec, event: { name: string; key?: string | null; forJob: boolean }): boolean {
  if (wait.name !== event.name) return false;
  if (event.forJob) return event.key === undefined || event.key === null || event.key === wait.key;
  return (event.key ?? '') === wait.key;
}
