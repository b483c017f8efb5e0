import type { Sql } from './db.ts';
import { type DeadLetterRow, bulkCalls as call } from './driver/bulk.ts';

export type DeadLetterGroup = DeadLetterRow;

/**
 * The dead letters (failed and oom_killed jobs) grouped by type and error fingerprint
 * (worker.dead_letters), the group seen last first. A group's `fingerprint` and `type` are the
 * filter that retries it: bulkRequeue(sql, { type, fingerprint }).
 */
export async function deadLetters(sql: Sql, options: { type?: string; limit?: number } = {}): Promise<DeadLetterGroup[]> {
  return call.deadLetters(sql, options.type ?? null, options.limit ?? 100);
}

/** How a job failed, as 16 hex digits: last_error normalised (ids, numbers, hex, quoted values, times) and hashed. */
export async function errorFingerprint(sql: Sql, error: string | null): Promise<string> {
  return call.fingerprint(sql, error);
}
