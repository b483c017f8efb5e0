import type { Queryable } from '../db.ts';
import type { Job, JsonObject } from '../job.ts';
import { int, parseJobRow, record, text, textOrNull, time } from './rows.ts';

/**
 * The calls of the bulk operations, the dead-letter view and replay: each a SQL function
 * (migrations/functions/worker.bulk_requeue.sql, bulk_cancel, dead_letters, replay_job), so an
 * operator at a SQL prompt runs the same thing.
 */

export interface BulkBatchRow {
  matched: number;
  /** requeued, or (cancel) cancelled at once */
  applied: number;
  /** (cancel) cancel requested: the started job's hook runs at its next step */
  requested: number;
  skipped: number;
  nextAfter: string | null;
}

export interface DeadLetterRow {
  type: string;
  fingerprint: string;
  error: string;
  jobs: number;
  failed: number;
  oomKilled: number;
  firstSeen: Date;
  lastSeen: Date;
  sampleId: string;
  sampleError: string | null;
}

const at = (now: Date | undefined) => now ?? null;

function batchOf(row: unknown): BulkBatchRow {
  const r = record(row, 'bulk batch row');
  return {
    matched: int(r.matched, 'matched'),
    applied: int(r.requeued ?? r.cancelled, 'applied'),
    requested: r.cancel_requested === undefined ? 0 : int(r.cancel_requested, 'cancel_requested'),
    skipped: int(r.skipped, 'skipped'),
    nextAfter: textOrNull(r.next_after, 'next_after'),
  };
}

export const bulkCalls = {
  async requeue(sql: Queryable, filter: JsonObject, dryRun: boolean, limit: number, after: string | null, now?: Date): Promise<BulkBatchRow> {
    const [row] = await sql`select * from worker.bulk_requeue(${sql.json(filter)}::jsonb, ${dryRun}, ${limit}::int, ${after}::uuid, ${at(now)}::timestamptz)`;
    return batchOf(row);
  },
  async cancel(sql: Queryable, filter: JsonObject, dryRun: boolean, reason: string, limit: number, after: string | null, now?: Date): Promise<BulkBatchRow> {
    const [row] = await sql`select * from worker.bulk_cancel(${sql.json(filter)}::jsonb, ${dryRun}, ${reason}, ${limit}::int, ${after}::uuid, ${at(now)}::timestamptz)`;
    return batchOf(row);
  },
  async deadLetters(sql: Queryable, type: string | null, limit: number): Promise<DeadLetterRow[]> {
    const rows = await sql`select * from worker.dead_letters(${type}::text, ${limit}::int)`;
    return rows.map((row) => {
      const r = record(row, 'dead letter row');
      return {
        type: text(r.type, 'type'), fingerprint: text(r.fingerprint, 'fingerprint'), error: text(r.error, 'error'),
        jobs: int(r.jobs, 'jobs'), failed: int(r.failed, 'failed'), oomKilled: int(r.oom_killed, 'oom_killed'),
        firstSeen: time(r.first_seen, 'first_seen'), lastSeen: time(r.last_seen, 'last_seen'),
        sampleId: text(r.sample_id, 'sample_id'), sampleError: textOrNull(r.sample_error, 'sample_error'),
      };
    });
  },
  async replay(sql: Queryable, id: string, fromStep: string | null, payload: JsonObject | null, now?: Date): Promise<Job> {
    const [row] = await sql`
      select * from worker.replay_job(${id}::uuid, ${fromStep}::text, ${payload === null ? null : sql.json(payload)}::jsonb, ${at(now)}::timestamptz)`;
    return parseJobRow(row);
  },
  async fingerprint(sql: Queryable, error: string | null): Promise<string> {
    const [row] = await sql`select worker.error_fingerprint(${error}::text) as fingerprint`;
    return text(record(row, 'fingerprint row').fingerprint, 'fingerprint');
  },
};
