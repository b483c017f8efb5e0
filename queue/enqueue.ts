import type { Queryable } from './db.ts';
import { translatePgError } from './errors.ts';
import { toJob, type Job, type JsonObject } from './job.ts';
import type { JobAccess } from './registry.ts';

export interface EnqueueInput {
  type: string;
  payload?: JsonObject;
  /** Lower runs first: 10 urgent, 50 normal (default), 100 low. */
  priority?: number;
  runAt?: Date;
  delayMs?: number;
  maxAttempts?: number;
  /** Debounce: a new job supersedes the waiting job of the same key. */
  dedupeKey?: string;
  /** Idempotent submit: the same key returns the existing job. */
  submitKey?: string;
  pool?: string;
  weight?: string;
  concurrencyKey?: string;
  concurrencyLimit?: number;
}

export interface EnqueueResult {
  job: Job;
  /** True when submitKey matched an earlier identical request: `job` is that earlier job. */
  duplicate: boolean;
  /** The waiting job this one superseded (same dedupeKey), if any. */
  superseded: string | null;
}

export interface ClockOption {
  /** Pinned time for tests; the database clock when absent. */
  now?: Date;
}

/**
 * Enqueue one job. Pass a transaction (`sql.begin(tx => enqueue(tx, …))`) to make the job exist
 * iff the caller's transaction commits.
 */
export async function enqueue(sql: Queryable, input: EnqueueInput, options: ClockOption = {}): Promise<EnqueueResult> {
  try {
    const [row] = await sql`
      select worker.enqueue_job_ex(
        ${input.type}, ${sql.json(input.payload ?? {})}::jsonb, ${input.priority ?? 50}::int,
        ${input.runAt ?? null}::timestamptz, ${input.maxAttempts ?? null}::int, ${input.dedupeKey ?? null},
        ${input.submitKey ?? null}, ${input.pool ?? null}, ${input.weight ?? null},
        ${input.concurrencyKey ?? null}, ${input.concurrencyLimit ?? null}::int,
        ${input.delayMs ?? null}::bigint, ${options.now ?? null}::timestamptz) as j`;
    return fromEnqueueRow(row!.j as Record<string, unknown>);
  } catch (error) {
    throw translatePgError(error);
  }
}

/** Enqueue many jobs in one round trip, all or nothing. */
export async function enqueueBatch(sql: Queryable, inputs: EnqueueInput[], options: ClockOption = {}): Promise<EnqueueResult[]> {
  if (inputs.length === 0) return [];
  try {
    const rows = await sql`
      select j from worker.enqueue_jobs(${sql.json(inputs as unknown as JsonObject[])}::jsonb, ${options.now ?? null}::timestamptz) j`;
    return rows.map((r) => fromEnqueueRow(r.j as Record<string, unknown>));
  } catch (error) {
    throw translatePgError(error);
  }
}

function fromEnqueueRow(row: Record<string, unknown>): EnqueueResult {
  return {
    job: toJob(row),
    duplicate: row._duplicate === true,
    superseded: (row._superseded as string | null | undefined) ?? null,
  };
}

export interface TypeAccess {
  access: JobAccess;
  /** How an internal type is meant to be enqueued (its route, its schedule, its parent job). */
  enqueueVia: string | null;
}

/**
 * Who may enqueue each of `types` over the generic routes, as the registry sync stored it
 * (worker.job_types). A type not in the table is left out: enqueue refuses it as unknown.
 */
export async function typeAccess(sql: Queryable, types: readonly string[]): Promise<Map<string, TypeAccess>> {
  const distinct = [...new Set(types)];
  if (distinct.length === 0) return new Map();
  const rows = await sql`
    select type, access, enqueue_via from worker.job_types where type in ${sql(distinct)}`;
  return new Map(rows.map((r) => [r.type as string, { access: r.access as JobAccess, enqueueVia: (r.enqueue_via as string | null) ?? null }]));
}
