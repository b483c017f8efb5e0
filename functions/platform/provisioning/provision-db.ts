/**
 * provision_db: a managed Postgres for a service, its connection string injected (encrypted)
 * into the service's desired state.
 *
 *   create       find the cluster by the job's tag, or create it (tagged, named after the job)
 *   wait_online  poll until `online` (bounded by onlineTimeoutMs)
 *   pool         get or create the transaction-mode pool; seal its connection string and write it
 *                into platform.services.desired_state.databases.<name> in the same transaction
 *                that completes the job
 *
 * The plaintext connection string exists only in memory inside the `pool` step: it is never in a
 * payload, checkpoint, result, event, log line or error message. Cancel or terminal failure
 * deletes the cluster by tag.
 */
import { z } from 'zod';
import type { Queryable } from '../../../queue/db.ts';
import { enqueue, type EnqueueResult } from '../../../queue/enqueue.ts';
import { ConflictError, PermanentError, ValidationError } from '../../../queue/errors.ts';
import { done, next, type JobType, type StepContext } from '../../../queue/registry.ts';
import { parseCheckpoint } from '../checkpoint.ts';
import { parseRow } from '../rows.ts';
import { encryptSecret, type KeyRing, type SealedSecret } from '../../lib/secrets.ts';
import type { CloudProvider } from './ports/cloud-provider.ts';
import { assertOwnership } from '../../lib/tenancy.ts';
import { findActiveJob } from './active-jobs.ts';
import { assertAccountOwns } from './ownership.ts';
import { defineProvisioningJobType } from './job-type.ts';
import {
  databaseClusterName,
  databasePoolName,
  databaseTag,
  PROVISION_CONCURRENCY,
  provisioningConcurrencyKey,
  RESOURCE_TAG,
} from './resources.ts';

export const PROVISION_DB = 'provision_db';
/** Where provision_db is enqueued (it is internal: not over POST /v1/jobs with the enqueue token). */
export const PROVISION_DB_ROUTE = 'POST /v1/databases';

/** The body of `POST /v1/databases`, and the job's payload. */
export const provisionDbRequest = z
  .object({
    accountId: z.string().min(1).max(200),
    serviceId: z.string().min(1).max(200),
    name: z.string().regex(/^[a-z][a-z0-9-]{1,38}[a-z0-9]$/, 'name must be 3-40 lowercase letters, digits and dashes, starting with a letter'),
    size: z.string().regex(/^db-[a-z0-9-]{1,60}$/, 'size must be a database size slug such as db-s-1vcpu-1gb'),
    region: z.string().regex(/^[a-z]{3}[0-9]$/, 'region must be a region slug such as nyc3'),
  })
  .strict();
export type ProvisionDbRequest = z.infer<typeof provisionDbRequest>;

export interface ProvisionDbDeps {
  cloud: CloudProvider;
  keyRing: KeyRing;
  /** Between polls of a creating cluster (default 15 s). */
  pollIntervalMs?: number;
  /** A cluster not online by then fails the job, which deletes it (default 45 min). */
  onlineTimeoutMs?: number;
  /** PgBouncer backend connections of the pool (default 10: fits the smallest size's 22). */
  poolSize?: number;
  /** Postgres major version; the provider's default when absent. */
  engineVersion?: string;
}

/** What desired_state.databases.<name> holds: the sealed connection string and where it points. */
export interface DesiredDatabase extends SealedSecret {
  poolName: string;
  poolMode: 'transaction';
  provider: 'digitalocean';
  databaseId: string;
  region: string;
  size: string;
  jobId: string;
  updatedAt: string;
}

/**
 * The AES-GCM context a service's database connection string is sealed under: readers (the
 * reconciler) open `desired_state.databases[name]` with `decryptSecret(entry, ring, {context:
 * databaseSecretContext(serviceId, name)})`, so an entry copied elsewhere does not open.
 */
export function databaseSecretContext(serviceId: string, name: string): string {
  return `starbase:service:${serviceId}:database:${name}`;
}

/** What `create` leaves for the steps after it: the provider's database id, from when it waits. */
const createdCheckpoint = z.looseObject({ databaseId: z.string().min(1), waitingSince: z.string().optional() });
/** Compensation runs after any step: the id may not be there yet. */
const anyCheckpoint = z.looseObject({ databaseId: z.string().min(1).optional() });

/** A live platform.databases row of the same service and name: the job that provisions it. */
const jobIdRow = z.object({ job_id: z.string() });

/**
 * Enqueue from a validated `POST /v1/databases` body: an OwnershipError (404/403) unless the
 * account exists and owns the service, a ConflictError for a name the service already has.
 */
export async function enqueueProvisionDb(sql: Queryable, request: ProvisionDbRequest, options: { submitKey?: string; now?: Date } = {}): Promise<EnqueueResult> {
  await assertOwnership(sql, request.accountId, request.serviceId);
  const [live] = await sql`
    select job_id from platform.databases
     where service_id = ${request.serviceId} and name = ${request.name} and status in ('provisioning', 'online')`;
  if (live) throw new ConflictError(`service ${request.serviceId} already has a database ${request.name} (job ${parseRow('platform.databases', jobIdRow, live).job_id})`, 'name');
  const pending = await findActiveJob(sql, PROVISION_DB, { serviceId: request.serviceId, name: request.name });
  if (pending) throw new ConflictError(`a database ${request.name} is already being provisioned for service ${request.serviceId} (job ${pending})`, 'name');
  return enqueue(
    sql,
    {
      type: PROVISION_DB,
      payload: request,
      submitKey: options.submitKey,
      concurrencyKey: provisioningConcurrencyKey(request.accountId),
      concurrencyLimit: PROVISION_CONCURRENCY,
    },
    { now: options.now },
  );
}

/** The deps with their defaults, as the steps below use them. */
function settle(deps: ProvisionDbDeps) {
  return {
    ...deps,
    pollIntervalMs: deps.pollIntervalMs ?? 15_000,
    onlineTimeoutMs: deps.onlineTimeoutMs ?? 45 * 60_000,
  };
}
type Settled = ReturnType<typeof settle>;

async function create(deps: Settled, ctx: StepContext<ProvisionDbRequest>) {
  const { payload: p, job, signal } = ctx;
  // Before anything is created at the provider, whatever path enqueued the job.
  await assertAccountOwns(ctx.sql, p.accountId, p.serviceId);
  const [other] = await ctx.sql`
    select job_id from platform.databases
     where service_id = ${p.serviceId} and name = ${p.name} and status in ('provisioning', 'online') and job_id <> ${job.id}`;
  if (other) throw new PermanentError(`service ${p.serviceId} already has a database ${p.name} (job ${parseRow('platform.databases', jobIdRow, other).job_id})`);

  const tag = databaseTag(job.id);
  const name = databaseClusterName(p.name, job.id);
  const existing = (await deps.cloud.listDatabasesByTag(tag, { signal })).find((d) => d.name === name);
  const database =
    existing ??
    (await deps.cloud.createDatabase({ name, engine: 'pg', version: deps.engineVersion, region: p.region, size: p.size, numNodes: 1, tags: [RESOURCE_TAG, tag] }, { signal }));
  const now = ctx.now();
  return next('wait_online', {
    checkpoint: { databaseId: database.id, waitingSince: now.toISOString() },
    delayMs: deps.pollIntervalMs,
    effect: async (tx) => {
      const updated = await tx`update platform.databases set provider_id = ${database.id}, updated_at = ${now} where job_id = ${job.id} returning id`;
      if (updated.length > 0) return;
      // A concurrent job that registered the same (service, name) first wins; wait_online notices.
      await tx`
        insert into platform.databases (job_id, account_id, service_id, name, region, size, provider_id, provider_tag, created_at, updated_at)
        values (${job.id}, ${p.accountId}, ${p.serviceId}, ${p.name}, ${p.region}, ${p.size}, ${database.id}, ${tag}, ${now}, ${now})
        on conflict do nothing`;
    },
  });
}

async function waitOnline(deps: Settled, ctx: StepContext<ProvisionDbRequest>) {
  const cp = parseCheckpoint(PROVISION_DB, createdCheckpoint, ctx.checkpoint);
  const [row] = await ctx.sql`select 1 from platform.databases where job_id = ${ctx.job.id}`;
  if (!row) throw new PermanentError(`another job registered database ${ctx.payload.name} of service ${ctx.payload.serviceId} first`);
  const database = await deps.cloud.getDatabase(cp.databaseId, { signal: ctx.signal });
  // Deleted behind our back: create it again (the name and tag still point to this job).
  if (!database) return next('create', { delayMs: 0 });
  if (database.status === 'online') return next('pool', { delayMs: 0 });
  const waited = ctx.now().getTime() - Date.parse(cp.waitingSince ?? ctx.now().toISOString());
  if (waited > deps.onlineTimeoutMs) throw new PermanentError(`database ${database.name} is still ${database.status} after ${Math.round(waited / 60_000)} min`);
  return next('wait_online', { delayMs: deps.pollIntervalMs });
}

async function pool(deps: Settled, ctx: StepContext<ProvisionDbRequest>) {
  const { payload: p, job, signal } = ctx;
  const { databaseId } = parseCheckpoint(PROVISION_DB, createdCheckpoint, ctx.checkpoint);
  // Checked here, not in the settle effect: an effect that throws fails the settle, which the
  // engine treats as a crash; a PermanentError fails the job and its compensation runs.
  // The service may have been deleted (or handed to another account) while the database was made.
  await assertAccountOwns(ctx.sql, p.accountId, p.serviceId);
  const poolName = databasePoolName(p.name);
  const existing = await deps.cloud.getConnectionPool(databaseId, poolName, { signal });
  const created =
    existing ?? (await deps.cloud.createConnectionPool(databaseId, { name: poolName, mode: 'transaction', size: deps.poolSize ?? 10, db: 'defaultdb', user: 'doadmin' }, { signal }));
  if (!created.uri) throw new Error(`DigitalOcean answered pool ${poolName} without a connection string`);
  const sealed = await encryptSecret(created.uri.reveal(), deps.keyRing, { context: databaseSecretContext(p.serviceId, p.name) });
  const now = ctx.now();
  // Spread into a plain object (not typed as the interface), so tx.json takes it.
  const entry = {
    ...sealed,
    poolName,
    poolMode: 'transaction',
    provider: 'digitalocean',
    databaseId,
    region: p.region,
    size: p.size,
    jobId: job.id,
    updatedAt: now.toISOString(),
  } satisfies DesiredDatabase;
  return done({ serviceId: p.serviceId, name: p.name, databaseId, poolName, status: 'online' }, async (tx) => {
    await tx`
      update platform.services
         set desired_state = jsonb_set(desired_state, '{databases}',
               coalesce(desired_state->'databases', '{}'::jsonb) || jsonb_build_object(${p.name}::text, ${tx.json(entry)}::jsonb)),
             updated_at = ${now}
       where id = ${p.serviceId} and account_id = ${p.accountId}`;
    await tx`update platform.databases set status = 'online', pool_name = ${poolName}, online_at = ${now}, updated_at = ${now} where job_id = ${job.id}`;
  });
}

/** Compensation: delete every cluster carrying the job's tag (and the one the checkpoint names). */
async function destroy(deps: Settled, ctx: StepContext<ProvisionDbRequest>) {
  const ids = new Set((await deps.cloud.listDatabasesByTag(databaseTag(ctx.job.id), { signal: ctx.signal })).map((d) => d.id));
  // a checkpoint that does not parse names no database: the tag still finds every one
  const known = anyCheckpoint.safeParse(ctx.checkpoint).data?.databaseId;
  if (known) ids.add(known);
  for (const id of ids) await deps.cloud.deleteDatabase(id, { signal: ctx.signal });
  const now = ctx.now();
  await ctx.sql`update platform.databases set status = 'destroyed', destroyed_at = ${now}, updated_at = ${now} where job_id = ${ctx.job.id} and status <> 'destroyed'`;
}

export function provisionDbJobType(deps: ProvisionDbDeps): JobType<ProvisionDbRequest> {
  return defineProvisioningJobType({
    type: PROVISION_DB,
    enqueueVia: PROVISION_DB_ROUTE,
    payload: provisionDbRequest,
    deps: settle(deps),
    steps: { start: create, create, wait_online: waitOnline, pool },
    compensate: destroy,
  });
}
