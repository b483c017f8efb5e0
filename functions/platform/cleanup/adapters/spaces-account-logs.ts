import type { Queryable } from '../../../../queue/db.ts';
import type { SpacesClient } from '../../../adapters/spaces-client.ts';
import type { AccountLogObjects } from '../ports/account-log-objects.ts';
import { accountArchiveKeys } from './account-archive-keys.ts';

/**
 * An account's build-log objects in Spaces (found as accountArchiveKeys says). One DeleteObject
 * per key: S3's multi-object delete wants a Content-MD5 of its body, which WebCrypto cannot
 * compute, and the purge's batch (100 keys a step by default) keeps the subrequests per step bounded.
 */
export class SpacesAccountLogObjects implements AccountLogObjects {
  constructor(private readonly sql: Queryable, private readonly client: SpacesClient) {}

  list(accountId: string, limit: number): Promise<string[]> {
    return accountArchiveKeys(this.sql, accountId, limit);
  }

  async delete(keys: string[]): Promise<void> {
    for (const key of keys) await this.client.deleteObject(key);
  }
}
