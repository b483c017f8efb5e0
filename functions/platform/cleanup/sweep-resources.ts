import { z } from 'zod';
import type { Queryable } from '../../../queue/db.ts';
import { jobIdsInStatus } from '../../../queue/jobs-query.ts';
import { parseRows } from '../rows.ts';
import { MANAGED_TAG, PLATFORM_RESOURCE_OWNERS, HOUR_MS, type CleanupAction, type CleanupDeps, type ResourceOwnerTable, type SweepContext, type SweepOutcome } from './sweep.ts';

/** A row whose provisioning job ended in one of these owns nothing (see ownerJobColumn). */
const ENDED_UNSUCCESSFULLY = ['failed', 'oom_killed', 'cancelled'] as const;

/** A live owner row: its tag, and (with ownerJobColumn) the id of the job that provisions it. */
const ownerRow = z.object({ tag: z.string(), owner_job: z.string().nullable().optional() });

async function liveOwnerTags(sql: Queryable, owners: ResourceOwnerTable[], tags: string[]): Promise<Set<string>> {
  const owned = new Set<string>();
  if (tags.length === 0) return owned;
  for (const o of owners) {
    const found = await sql`
      select r.${sql(o.tagColumn)} as tag${o.ownerJobColumn ? sql`, r.${sql(o.ownerJobColumn)}::text as owner_job` : sql``} from ${sql(o.table)} r
       where r.${sql(o.tagColumn)} = any(${tags}::text[])
         ${o.deadStatus ? sql`and r.${sql(o.deadStatus.column)} is distinct from ${o.deadStatus.value}` : sql``}`;
    const rows = parseRows(o.table, ownerRow, found);
    const ownerJobs = rows.flatMap((r) => (r.owner_job == null ? [] : [r.owner_job]));
    const ended = o.ownerJobColumn ? await jobIdsInStatus(sql, ownerJobs, ENDED_UNSUCCESSFULLY) : new Set<string>();
    for (const r of rows) if (r.owner_job == null || !ended.has(r.owner_job)) owned.add(r.tag);
  }
  return owned;
}

export async function sweepOrphanedResources(c: SweepContext, deps: CleanupDeps): Promise<SweepOutcome> {
  const grace = deps.orphanGraceMs ?? 6 * HOUR_MS;
  const resources = (await deps.inventory.listTagged(deps.managedTag ?? MANAGED_TAG)).filter((r) => r.createdAt.getTime() <= c.now.getTime() - grace);
  const owned = await liveOwnerTags(c.sql, deps.ownerTables ?? PLATFORM_RESOURCE_OWNERS, [...new Set(resources.flatMap((r) => r.tags))]);
  const orphans = resources.filter((r) => !r.tags.some((t) => owned.has(t))).sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime());
  const actions: CleanupAction[] = [];
  for (const r of orphans.slice(0, c.batch)) {
    const action = { action: 'delete_resource', target: `${r.type}:${r.id}`, detail: { name: r.name, tags: r.tags, createdAt: r.createdAt.toISOString() } };
    await c.act(action, () => deps.inventory.delete(r));
    actions.push(action);
  }
  return { actions, more: orphans.length > c.batch };
}
