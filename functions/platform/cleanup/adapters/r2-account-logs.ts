import { z } from 'zod';
import type { Queryable } from '../../../../queue/db.ts';
import { jobIdsByPayloadField } from '../../../../queue/jobs-query.ts';
import type { AccountLogObjects } from '../ports/account-log-objects.ts';
import { archiveKey } from '../../build/adapters/r2-log-archive.ts';
import { parseRows } from '../../rows.ts';
import { currentUsage } from '../../../usage.ts';

const serviceRow = z.object({ id: z.string() });

/** The slice of the R2 binding this needs, declared structurally (see LogBucket). */
export interface DeletableBucket {
  delete(keys: string | string[]): Promise<void>;
}

/**
 * An account's build-log objects in R2. Archive keys are per build (`builds/<buildJobId>.log`), so
 * the account's builds are found through its services' build jobs. A build job already pruned
 * by the engine (7 days after it finished, by default) can no longer be tied to its account:
 * its object stays until a bucket lifecycle rule expires it — set one (e.g. 90 days on `builds/`).
 */
export class R2AccountLogObjects implements AccountLogObjects {
  constructor(private readonly sql: Queryable, private readonly bucket: DeletableBucket) {}

  async list(accountId: string, limit: number): Promise<string[]> {
    const services = await this.sql`select s.id from platform.services s where s.account_id = ${accountId}`;
    const serviceIds = parseRows('platform.services', serviceRow, services).map((s) => s.id);
    const buildIds = await jobIdsByPayloadField(this.sql, { type: 'build', field: 'serviceId', values: serviceIds, limit });
    return buildIds.map(archiveKey);
  }

  async delete(keys: string[]): Promise<void> {
    if (keys.length === 0) return;
    currentUsage()?.countSubrequest('r2');
    await this.bucket.delete(keys);
  }
}
