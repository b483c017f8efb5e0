import type { Queryable } from '../db.ts';
import type { Json } from '../job.ts';

/** worker.job_events: the history row a transition writes beside its change. */
export async function insertJobEvent(sql: Queryable, jobId: string, at: Date, kind: string, detail: { [key: string]: Json }): Promise<void> {
  await sql`insert into worker.job_events (job_id, at, kind, detail) values (${jobId}, ${at}, ${kind}, ${sql.json(detail)})`;
}
