import type { Queryable } from '../../queue/db.ts';

/**
 * Every request and every step that acts for an account checks the account the same way: the
 * account exists, and the service it names (if any) exists and is that account's. A service with
 * no account (a row written before services were bound to accounts) belongs to nobody, so no
 * account may act on it. The routes answer 404 for an unknown account or service and 403 for a
 * foreign one; a step fails permanently (the same refusal, whichever path enqueued the job:
 * its own route, the generic POST /v1/jobs, or SQL).
 */
export class OwnershipError extends Error {
  constructor(
    readonly status: 403 | 404,
    message: string,
    readonly field: 'accountId' | 'serviceId',
  ) {
    super(message);
    this.name = 'OwnershipError';
  }
}

/**
 * Throws an OwnershipError unless `accountId` exists and owns `serviceId` (when given). With
 * `lockService`, the service row is key-share locked until the caller's transaction ends, so a
 * concurrent delete or reassignment waits for what the caller writes.
 */
export async function assertOwnership(
  sql: Queryable,
  accountId: string,
  serviceId?: string,
  options: { lockService?: boolean } = {},
): Promise<void> {
  const [account] = await sql`select 1 from platform.accounts where id = ${accountId}`;
  if (!account) throw new OwnershipError(404, `no account ${accountId}`, 'accountId');
  if (serviceId === undefined) return;
  const [service] = options.lockService
    ? await sql`select account_id from platform.services where id = ${serviceId} for key share`
    : await sql`select account_id from platform.services where id = ${serviceId}`;
  if (!service) throw new OwnershipError(404, `no service ${serviceId}`, 'serviceId');
  if (service.account_id !== accountId) {
    throw new OwnershipError(403, `service ${serviceId} does not belong to account ${accountId}`, 'accountId');
  }
}
