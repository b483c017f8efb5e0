import type { Queryable } from '../../queue/index.ts';

/** The account a test's builds and provisioning act for, unless it names another. */
export const TEST_ACCOUNT = 'acct-test';

/** An account (no plan: enough for ownership checks), idempotent. */
export async function seedAccount(sql: Queryable, accountId: string = TEST_ACCOUNT): Promise<void> {
  await sql`insert into platform.accounts (id) values (${accountId}) on conflict do nothing`;
}

/** An account and a service it owns; a service that already exists is left as it is. */
export async function seedService(sql: Queryable, serviceId: string, accountId: string = TEST_ACCOUNT): Promise<void> {
  await seedAccount(sql, accountId);
  await sql`insert into platform.services (id, account_id) values (${serviceId}, ${accountId}) on conflict do nothing`;
}
