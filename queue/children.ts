// Child jobs with join: a step ends by enqueueing children, atomically with its settle, and the
// job waits, parked, until all of them (or the first, or a count) have ended; it then resumes at
// the step it named, reading each child's outcome with ctx.children(). The join is made in the
// settle of the child that completes it (migrations/0200_children.sql), so nothing polls.
import type { Queryable, Sql } from './db.ts';
import { childRows, parentIdOf, spawnChildrenRow, waitRow } from './driver/children.ts';
import type { EnqueueInput } from './enqueue.ts';
import { translatePgError, ValidationError } from './errors.ts';
import type { Job, JobStatus, Json, JsonObject } from './job.ts';
import type { SettleEffect } from './settle.ts';

/** How many children end the wait: every one, the first, or this many. */
export type JoinCondition = 'all' | 'first' | number;

/** The most children one step may spawn (one statement; the billing run spawns one per account). */
export const MAX_CHILDREN = 100_000;

export interface SpawnOptions {
  /** The step the job resumes at once the join holds. */
  next: string;
  /** Default 'all'. */
  join?: JoinCondition;
  /** State for later steps, merged into the checkpoint. */
  checkpoint?: JsonObject;
  effect?: SettleEffect;
}

export interface SpawnResult extends SpawnOptions {
  outcome: 'spawn';
  children: EnqueueInput[];
}

/**
 * End the step by enqueueing `children` and waiting for them. A child whose submitKey names an
 * existing job is that job, adopted: it is joined like the others (and counts as ended at once
 * if it has).
 */
export const spawn = (children: EnqueueInput[], options: SpawnOptions): SpawnResult => ({ outcome: 'spawn', children, ...options });

/** What the spawn's settle did. */
export interface SpawnSettled {
  waitNo: number;
  /** Distinct children joined. */
  total: number;
  /** Children this spawn created (the rest matched an existing job by submit key: adopted). */
  created: number;
  adopted: number;
  /** Children that had already ended. */
  ended: number;
  /** Ended children the join needs. */
  need: number;
  /** The join held at once: the job is due now, not parked. */
  joined: boolean;
}

/** A child as its parent sees it: its outcome, as the child's row is now. */
export interface ChildOutcome {
  id: string;
  type: string | null;
  /** 'pruned' when the child's row was deleted by retention before it was read. */
  status: JobStatus | 'pruned';
  result: Json | null;
  lastError: string | null;
  submitKey: string | null;
  createdAt: Date | null;
  finishedAt: Date | null;
}

/** One wait of a parent (one spawn): its join. */
export interface ChildJoin {
  parentId: string;
  /** 1 for the job's first spawn, 2 for its second, … */
  waitNo: number;
  join: 'all' | 'first' | 'count';
  need: number;
  total: number;
  ended: number;
  /** Children the spawn enqueued; total − created were adopted. */
  created: number;
  nextStep: string;
  createdAt: Date;
  /** When the join held (null while the job waits). */
  joinedAt: Date | null;
}

/** One wait of a parent with its children. */
export interface JobChildren extends ChildJoin {
  children: ChildOutcome[];
}

type Fenced = Pick<Job, 'id' | 'leaseToken'>;

function checkSpawn(result: SpawnResult): { join: 'all' | 'first' | 'count'; count: number | null } {
  if (!Array.isArray(result.children)) throw new ValidationError('children must be an array of jobs to enqueue', 'children');
  if (result.children.length > MAX_CHILDREN) {
    throw new ValidationError(`a step may spawn at most ${MAX_CHILDREN} children, got ${result.children.length}`, 'children');
  }
  if (typeof result.next !== 'string' || result.next.trim() === '') throw new ValidationError('next must name the step to resume at', 'next');
  const join = result.join ?? 'all';
  if (join === 'all' || join === 'first') return { join, count: null };
  if (typeof join !== 'number' || !Number.isInteger(join) || join < 1 || join > result.children.length) {
    throw new ValidationError(`join must be 'all', 'first' or a whole number from 1 to the number of children (${result.children.length}), got ${JSON.stringify(join)}`, 'join');
  }
  return { join: 'count', count: join };
}

/**
 * The spawn's settle: fenced like every settle (null when the lease was lost, and nothing is
 * written); the children, the wait and the park are one transaction with the step's effect.
 */
export async function spawnChildren(sql: Sql, job: Fenced, result: SpawnResult, options: { now?: Date } = {}): Promise<SpawnSettled | null> {
  const { join, count } = checkSpawn(result);
  const statement = { step: result.next, checkpoint: result.checkpoint ?? {}, join, count, children: result.children };
  try {
    if (!result.effect) return await spawnChildrenRow(sql, job, statement, options.now);
    const effect = result.effect;
    return await sql.begin(async (tx) => {
      const settled = await spawnChildrenRow(tx, job, statement, options.now);
      if (settled) await effect(tx);
      return settled;
    });
  } catch (error) {
    throw translatePgError(error);
  }
}

/** A job's children: those of its latest spawn, or of `waitNo`. null when it never spawned (or has no such wait). */
export async function jobChildren(sql: Queryable, parentId: string, options: { waitNo?: number } = {}): Promise<JobChildren | null> {
  const wait = await waitRow(sql, parentId, options.waitNo);
  return wait && { ...wait, children: await childRows(sql, parentId, wait.waitNo, null) };
}

/** A job's place in a family: the job that created it, and its latest wait with the first `limit` children. */
export interface JobFamily {
  parentId: string | null;
  children: JobChildren | null;
}

export async function jobFamily(sql: Queryable, id: string, options: { limit?: number } = {}): Promise<JobFamily> {
  const wait = await waitRow(sql, id, undefined);
  return {
    parentId: await parentIdOf(sql, id),
    children: wait && { ...wait, children: await childRows(sql, id, wait.waitNo, options.limit ?? 1000) },
  };
}

/** A job's latest wait (or `waitNo`) without its children: the counts alone. */
export async function childJoin(sql: Queryable, parentId: string, options: { waitNo?: number } = {}): Promise<ChildJoin | null> {
  return waitRow(sql, parentId, options.waitNo);
}
