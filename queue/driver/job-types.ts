import type { Queryable } from '../db.ts';
import type { TypeAccess } from '../enqueue.ts';
import type { DeadlineSeverity, Json } from '../job.ts';
import type { JobAccess } from '../registry.ts';
import { record, text, textOrNull } from './rows.ts';

/** worker.job_types: what the registry sync stores of each type, and what enqueue reads back. */

/** A job_types row as the registry writes it (snake_case: the table's column names). */
export interface JobTypeRow {
  type: string;
  lease_ms: number;
  max_attempts: number;
  weight: string;
  payload_schema: Json;
  access: JobAccess;
  enqueue_via: string | null;
  concurrency_key: string | null;
  concurrency_limit: number | null;
  deadline_ms: number | null;
  deadline_severity: DeadlineSeverity | null;
  rate_key: string | null;
  fair_key: string | null;
}

/** A worker.rate_limits row as a type declares it (0210). */
export interface RateLimitRow {
  key: string;
  max_starts: number;
  per_ms: number;
}

/** Upsert the types, rewriting a row only when it changed (a redeploy of the same registry writes nothing). */
export async function upsertJobTypes(sql: Queryable, rows: JobTypeRow[], rateLimits: RateLimitRow[] = []): Promise<void> {
  // The keys first (job_types.rate_key references them); a changed limit applies from the next
  // claim, the key's recorded starts and pause untouched.
  if (rateLimits.length > 0) {
    await sql`
      insert into worker.rate_limits (key, max_starts, per_ms)
      select x.key, x.max_starts, x.per_ms from jsonb_to_recordset(${sql.json(rateLimits.map((r) => ({ ...r })))}::jsonb)
             as x(key text, max_starts int, per_ms bigint)
      order by x.key
      on conflict (key) do update set max_starts = excluded.max_starts, per_ms = excluded.per_ms
      where (worker.rate_limits.max_starts, worker.rate_limits.per_ms) is distinct from (excluded.max_starts, excluded.per_ms)`;
  }
  await sql`
    insert into worker.job_types (type, lease_ms, max_attempts, weight, payload_schema, access, enqueue_via, concurrency_key, concurrency_limit,
                                  deadline_ms, deadline_severity, rate_key, fair_key)
    select x.type, x.lease_ms, x.max_attempts, x.weight, x.payload_schema, x.access, x.enqueue_via, x.concurrency_key, x.concurrency_limit,
           x.deadline_ms, x.deadline_severity, x.rate_key, x.fair_key
      from jsonb_to_recordset(${sql.json(rows.map((r) => ({ ...r })))}::jsonb)
           as x(type text, lease_ms int, max_attempts int, weight text, payload_schema jsonb,
                access text, enqueue_via text, concurrency_key text, concurrency_limit int, deadline_ms bigint, deadline_severity text,
                rate_key text, fair_key text)
    on conflict (type) do update set lease_ms = excluded.lease_ms, max_attempts = excluded.max_attempts,
           weight = excluded.weight, payload_schema = excluded.payload_schema, access = excluded.access,
           enqueue_via = excluded.enqueue_via, concurrency_key = excluded.concurrency_key,
           concurrency_limit = excluded.concurrency_limit, deadline_ms = excluded.deadline_ms,
           deadline_severity = excluded.deadline_severity, rate_key = excluded.rate_key, fair_key = excluded.fair_key
    where (worker.job_types.lease_ms, worker.job_types.max_attempts, worker.job_types.weight, worker.job_types.payload_schema,
           worker.job_types.access, worker.job_types.enqueue_via, worker.job_types.concurrency_key, worker.job_types.concurrency_limit,
           worker.job_types.deadline_ms, worker.job_types.deadline_severity, worker.job_types.rate_key, worker.job_types.fair_key)
          is distinct from (excluded.lease_ms, excluded.max_attempts, excluded.weight, excluded.payload_schema,
           excluded.access, excluded.enqueue_via, excluded.concurrency_key, excluded.concurrency_limit,
           excluded.deadline_ms, excluded.deadline_severity, excluded.rate_key, excluded.fair_key)`;
}

function access(value: unknown): JobAccess {
  const a = text(value, 'access');
  if (a !== 'public' && a !== 'internal') throw new Error(`worker.job_types.access is ${a}: migrations and queue/driver/job-types.ts disagree`);
  return a;
}

/** Who may enqueue each of `types` (distinct, non-empty); a type not in the table is left out. */
export async function typeAccessRows(sql: Queryable, types: string[]): Promise<Map<string, TypeAccess>> {
  const rows = await sql`select type, access, enqueue_via from worker.job_types where type in ${sql(types)}`;
  return new Map(rows.map((row) => {
    const r = record(row, 'job_types row');
    return [text(r.type, 'type'), { access: access(r.access), enqueueVia: textOrNull(r.enqueue_via, 'enqueue_via') }];
  }));
}
