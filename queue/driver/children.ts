import type { Queryable } from '../db.ts';
import type { Job, Json, JsonObject } from '../job.ts';
import type { ChildOutcome, ChildJoin, SpawnSettled } from '../children.ts';
import type { EnqueueInput } from '../enqueue.ts';
import { int, json, jobStatus, record, text, textOrNull, time, timeOrNull } from './rows.ts';

/** The statements of child jobs (migrations/0200_children.sql). */

type Fenced = Pick<Job, 'id' | 'leaseToken'>;

export interface SpawnStatement {
  step: string;
  checkpoint: JsonObject;
  join: 'all' | 'first' | 'count';
  count: number | null;
  children: EnqueueInput[];
}

/** worker.spawn_children: the fenced settle that enqueues the children and parks the job; null when the lease was lost. */
export async function spawnChildrenRow(sql: Queryable, job: Fenced, spawn: SpawnStatement, now: Date | undefined): Promise<SpawnSettled | null> {
  const [row] = await sql`
    select worker.spawn_children(${job.id}::uuid, ${job.leaseToken}::uuid, ${spawn.step}::text, ${sql.json(spawn.checkpoint)}::jsonb,
                                 ${spawn.join}::text, ${spawn.count}::int, ${sql.json(spawn.children as unknown as Json)}::jsonb,
                                 ${now ?? null}::timestamptz) as s`;
  const s = record(row, 'spawn_children row').s;
  if (s === null || s === undefined) return null;
  const r = record(s, 'spawn_children result');
  return {
    waitNo: int(r.waitNo, 'waitNo'),
    total: int(r.total, 'total'),
    created: int(r.created, 'created'),
    adopted: int(r.adopted, 'adopted'),
    ended: int(r.ended, 'ended'),
    need: int(r.need, 'need'),
    joined: r.joined === true,
  };
}

/** One wait of a parent (the latest when waitNo is absent); null without one. */
export async function waitRow(sql: Queryable, parentId: string, waitNo: number | undefined): Promise<ChildJoin | null> {
  const [wait] = await sql`
    select * from worker.child_joins w
     where w.parent_id = ${parentId}
     ${waitNo === undefined ? sql`order by w.wait_no desc limit 1` : sql`and w.wait_no = ${waitNo}`}`;
  if (!wait) return null;
  const w = record(wait, 'child_joins row');
  return {
    parentId,
    waitNo: int(w.wait_no, 'wait_no'),
    join: text(w.join_kind, 'join_kind') as ChildJoin['join'],
    need: int(w.need, 'need'),
    total: int(w.total, 'total'),
    ended: int(w.ended, 'ended'),
    created: int(w.created, 'created'),
    nextStep: text(w.next_step, 'next_step'),
    createdAt: time(w.created_at, 'created_at'),
    joinedAt: timeOrNull(w.joined_at, 'joined_at'),
  };
}

/** A wait's children in the order they were given, from worker.children. */
export async function childRows(sql: Queryable, parentId: string, waitNo: number, limit: number | null): Promise<ChildOutcome[]> {
  const rows = await sql`
    select c.* from worker.children c where c.parent_id = ${parentId} and c.wait_no = ${waitNo} order by c.position
     ${limit === null ? sql`` : sql`limit ${limit}`}`;
  return rows.map(childOf);
}

function childOf(row: unknown): ChildOutcome {
  const r = record(row, 'children row');
  // A child pruned before its parent read it keeps its link and its id; the rest is gone.
  const pruned = r.status === null;
  return {
    id: text(r.child_id, 'child_id'),
    type: pruned ? null : text(r.type, 'type'),
    status: pruned ? 'pruned' : jobStatus(r.status),
    result: json(r.result),
    lastError: textOrNull(r.last_error, 'last_error'),
    submitKey: textOrNull(r.submit_key, 'submit_key'),
    createdAt: pruned ? null : time(r.created_at, 'created_at'),
    finishedAt: timeOrNull(r.finished_at, 'finished_at'),
  };
}

/** The job that created (or first adopted) a job, if any. */
export async function parentIdOf(sql: Queryable, id: string): Promise<string | null> {
  const [row] = await sql`select parent_id from worker.jobs where id = ${id}`;
  return row ? textOrNull(record(row, 'jobs row').parent_id, 'parent_id') : null;
}
