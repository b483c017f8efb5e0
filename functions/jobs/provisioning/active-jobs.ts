import type { Queryable } from '../../../queue/db.ts';
import type { JsonObject } from '../../../queue/job.ts';

/**
 * A queued or running job of `type` whose payload contains `match`: a provisioning request for
 * something already on its way (before its first step has registered a platform row).
 */
export async function findActiveJob(sql: Queryable, type: string, match: JsonObject): Promise<string | null> {
  const [row] = await sql`
    select id from worker.jobs
     where type = ${type} and status in ('queued', 'running') and payload @> ${sql.json(match)}::jsonb
     limit 1`;
  return row ? (row.id as string) : null;
}
