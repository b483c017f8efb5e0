import type { Queryable } from '../../../../queue/db.ts';
import type { AccountLogObjects } from '../ports/account-log-objects.ts';
import { accountArchiveKeys } from './account-archive-keys.ts';
import { currentUsage } from '../../../usage.ts';

/** The slice of the R2 binding this needs, declared structurally (see LogBucket). */
export interface DeletableBucket {
  delete(keys: string | string[]): Promise<void>;
}

/** An account's build-log objects in R2 (found as accountArchiveKeys says), deleted in one call per batch. */
export class R2AccountLogObjects implements AccountLogObjects {
  constructor(private readonly sql: Queryable, private readonly bucket: DeletableBucket) {}

  list(accountId: string, limit: number): Promise<string[]> {
    return accountArchiveKeys(this.sql, accountId, limit);
  }

  async delete(keys: string[]): Promise<void> {
    if (keys.length === 0) return;
    currentUsage()?.countSubrequest('r2');
    await this.bucket.delete(keys);
  }
}
