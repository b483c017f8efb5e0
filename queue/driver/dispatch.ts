// The fan-out's read of the queue: how much is due now (when the next step falls due is
// maintenance.ts's nextDueInMs, which the drains share). Both walk jobs_due_idx (run_at, queued
// rows only), so their cost does not grow with the queue.
import type { Queryable } from '../db.ts';
import { at } from './clock.ts';

/**
 * Due steps runnable by `pool` (its own and unpooled), counted up to `cap`: the fan-out only needs
 * to know whether there is more than some shards can take, never the exact depth.
 */
export async function countDue(sql: Queryable, pool: string, cap: number, now: Date | undefined): Promise<number> {
  const [row] = await sql<{ n: number }[]>`
    select count(*)::int as n from (
      select 1 from worker.jobs
       where status = 'queued' and run_at <= ${at(sql, now)} and (pool is null or pool = ${pool})
       limit ${cap}) due`;
  return row?.n ?? 0;
}
