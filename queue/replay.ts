import type { Sql } from './db.ts';
import { bulkCalls as call } from './driver/bulk.ts';
import { NotFoundError, translatePgError } from './errors.ts';
import { isJobId, type Job, type JsonObject } from './job.ts';

/**
 * Run an ended job (done, failed, cancelled, oom_killed) again as a new job (worker.replay_job),
 * from `fromStep` (default 'start', its first) with the old job's last checkpoint, and with its
 * payload or an edited one (checked as an enqueue checks it). The old job is left as it is; the
 * two are linked in their history: 'replay_of' on the new job, 'replayed_by' on the old.
 */
export async function replayJob(sql: Sql, id: string, options: { fromStep?: string; payload?: JsonObject; now?: Date } = {}): Promise<Job> {
  if (!isJobId(id)) throw new NotFoundError(`no job ${id}`);
  try {
    return await call.replay(sql, id, options.fromStep ?? null, options.payload ?? null, options.now);
  } catch (error) {
    throw translatePgError(error);
  }
}
