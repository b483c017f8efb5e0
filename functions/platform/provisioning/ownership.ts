import type { Queryable } from '../../../queue/db.ts';
import { PermanentError } from '../../../queue/errors.ts';
import { assertOwnership, OwnershipError } from '../../lib/tenancy.ts';

/**
 * A provisioning step's own check that the payload's account exists (and owns the service): the
 * route checks before enqueueing, but POST /v1/jobs and SQL reach the step without it. A refusal
 * is permanent (retrying cannot change who owns what), so the job fails before the provider is
 * called, and its compensation finds nothing to delete.
 */
export async function assertAccountOwns(sql: Queryable, accountId: string, serviceId?: string): Promise<void> {
  try {
    await assertOwnership(sql, accountId, serviceId);
  } catch (error) {
    if (error instanceof OwnershipError) throw new PermanentError(`refused: ${error.message}`);
    throw error;
  }
}
