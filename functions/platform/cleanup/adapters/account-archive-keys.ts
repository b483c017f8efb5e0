import { z } from 'zod';
import type { Queryable } from '../../../../queue/db.ts';
import { jobIdsByPayloadField } from '../../../../queue/jobs-query.ts';
import { archiveKey } from '../../build/adapters/conditional-log-archive.ts';
import { parseRows } from '../../rows.ts';

const serviceRow = z.object({ id: z.string() });

/**
 * Up to `limit` archive keys of an account's builds, oldest build first, whichever store holds
 * them. Archive keys are per build (`builds/<buildJobId>.log`), so the account's builds are found
 * through its services' build jobs. A build job already pruned by the engine (7 days after it
 * finished, by default) can no longer be tied to its account: its object stays until a bucket
 * lifecycle rule expires it — set one (e.g. 90 days on `builds/`).
 */
export async function accountArchiveKeys(sql: Queryable, accountId: string, limit: number): Promise<string[]> {
  const services = await sql`select s.id from platform.services s where s.account_id = ${accountId}`;
  const serviceIds = parseRows('platform.services', serviceRow, services).map((s) => s.id);
  const buildIds = await jobIdsByPayloadField(sql, { type: 'build', field: 'serviceId', values: serviceIds, limit });
  return buildIds.map(archiveKey);
}
