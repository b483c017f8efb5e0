import type { Queryable } from '../../../queue/db.ts';
import type { JsonObject } from '../../../queue/job.ts';
import { findActiveJobId } from '../../../queue/jobs-query.ts';

/**
 * A queued or running job of `type` whose payload contains `match`: a provisioning request for
 * something already on its way (before its first step has registered a platform row).
 */
export function findActiveJob(sql: Queryable, type: string, match: JsonObject): Promise<string | null> {
  return findActiveJobId(sql, type, match);
}
