import type { Queryable } from '../../../queue/db.ts';
import type { JsonObject } from '../../../queue/job.ts';
import type { AccountLogObjects } from './ports/account-log-objects.ts';
import type { CloudInventory } from './ports/cloud-inventory.ts';

/** What every cleanup sweep is given and gives back (the sweeps are sweep-resources.ts and sweep-accounts.ts). */

/** A table whose rows own cloud resources: a resource is owned while a live row's tag is on it. */
export interface ResourceOwnerTable {
  table: string;
  tagColumn: string;
  accountColumn: string;
  /** Rows with this status own nothing any more (their resources should be gone). */
  deadStatus?: { column: string; value: string };
  /**
   * The column holding the id of the job that provisions the row. A row whose job ended failed,
   * oom_killed or cancelled owns nothing either: the runner compensates a job it fails or
   * cancels, but one ended by the lease rescue (a crash at the top weight class, or on its final
   * attempt) runs no hook, and its row would otherwise keep its resources forever. Requeueing the
   * job makes the row an owner again.
   */
  ownerJobColumn?: string;
}

/** The tag on every resource provisioning creates (functions/platform/provisioning/resources.ts). */
export const MANAGED_TAG = 'starbase';

/** platform.databases and platform.clusters keep the tag they put on their resources. */
export const PLATFORM_RESOURCE_OWNERS: ResourceOwnerTable[] = [
  { table: 'platform.databases', tagColumn: 'provider_tag', accountColumn: 'account_id', deadStatus: { column: 'status', value: 'destroyed' }, ownerJobColumn: 'job_id' },
  { table: 'platform.clusters', tagColumn: 'provider_tag', accountColumn: 'account_id', deadStatus: { column: 'status', value: 'destroyed' }, ownerJobColumn: 'id' },
];

/** The rows of a purged account (each table has an account_id column), deleted in this order. */
export const PURGED_ACCOUNT_TABLES = [
  'platform.databases',
  'platform.clusters',
  'platform.services',
  'platform.usage_totals',
  'platform.database_size_snapshots',
];

export const HOUR_MS = 3_600_000;
export const DAY_MS = 24 * HOUR_MS;

export interface CleanupDeps {
  inventory: CloudInventory;
  logs: AccountLogObjects;
  managedTag?: string;
  ownerTables?: ResourceOwnerTable[];
  accountTables?: string[];
  /** Untagged-by-a-live-row resources younger than this are left alone (default 6 h). */
  orphanGraceMs?: number;
  /** How long an account may stay in payment_failed before its services are suspended (default 7 days). */
  paymentGraceMs?: number;
  /** How long a cancelled account's data is kept (default 30 days). */
  cancelledRetentionMs?: number;
  /** Actions per step (default 100). */
  batchSize?: number;
}

export interface CleanupAction {
  action: string;
  target: string;
  detail?: JsonObject;
}

export interface SweepOutcome {
  actions: CleanupAction[];
  /** Work is left for another batch. */
  more: boolean;
}

export interface SweepContext {
  sql: Queryable;
  now: Date;
  dryRun: boolean;
  batch: number;
  /** Take the action (unless dry run) and write it to the audit trail. */
  act(action: CleanupAction, perform?: () => Promise<unknown>): Promise<void>;
}
