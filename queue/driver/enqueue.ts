import type { Queryable } from '../db.ts';
import type { EnqueueInput, EnqueueResult } from '../enqueue.ts';
import type { Json } from '../job.ts';
import { parseJobRow, record, textOrNull } from './rows.ts';

/**
 * The enqueue statements: one round trip each to the SQL functions other services call too
 * (migrations/functions/worker.enqueue_*.sql), so TypeScript and SQL enqueue are one implementation.
 */

/** worker.enqueue_job_ex: one job. */
export async function enqueueRow(sql: Queryable, input: EnqueueInput, now: Date | undefined): Promise<EnqueueResult> {
  const [row] = await sql`
    select worker.enqueue_job_ex(
      ${input.type}, ${sql.json(input.payload ?? {})}::jsonb, ${input.priority ?? 50}::int,
      ${input.runAt ?? null}::timestamptz, ${input.maxAttempts ?? null}::int, ${input.dedupeKey ?? null},
      ${input.submitKey ?? null}, ${input.pool ?? null}, ${input.weight ?? null},
      ${input.concurrencyKey ?? null}, ${input.concurrencyLimit ?? null}::int,
      ${input.delayMs ?? null}::bigint, ${now ?? null}::timestamptz
      ${trailingArgs(sql, input)}) as j`;
  return parseEnqueued(record(row, 'enqueue_job_ex row').j);
}

/**
 * The per-job deadline's arguments, only when the job has one: the statement of a job without
 * stays the one it was before 0180 (one prepared statement for the common enqueue, and a
 * database not yet migrated still takes it). The same for its rate limit and fairness key.
 */
function trailingArgs(sql: Queryable, input: EnqueueInput) {
  const flow = input.rateLimit !== undefined || input.fairnessKey !== undefined;
  if (input.deadlineMs === undefined && input.deadlineSeverity === undefined && !flow) return sql``;
  const deadline = sql`, ${input.deadlineMs ?? null}::bigint, ${input.deadlineSeverity ?? null}::text`;
  if (!flow) return deadline;
  // the job's own rate limit and fairness key (0240), likewise only when given
  return sql`${deadline}, ${input.rateLimit === undefined ? null : sql.json(input.rateLimit as unknown as Json)}::jsonb, ${input.fairnessKey ?? null}::text`;
}

/** worker.enqueue_jobs: many jobs in one statement, all or nothing. */
export async function enqueueRows(sql: Queryable, inputs: EnqueueInput[], now: Date | undefined): Promise<EnqueueResult[]> {
  const rows = await sql`
    select j from worker.enqueue_jobs(${sql.json(inputsJson(inputs))}::jsonb, ${now ?? null}::timestamptz) j`;
  return rows.map((r) => parseEnqueued(record(r, 'enqueue_jobs row').j));
}

/**
 * The inputs as given, every key passed through: worker.enqueue_jobs validates them (an unknown
 * key is its error to report, not ours to drop). An interface has no index signature, hence the cast.
 */
function inputsJson(inputs: EnqueueInput[]): Json {
  return inputs as unknown as Json;
}

/** The job's to_jsonb() with _duplicate and _superseded beside its columns. */
function parseEnqueued(value: unknown): EnqueueResult {
  const row = record(value, 'enqueued job');
  return { job: parseJobRow(row), duplicate: row._duplicate === true, superseded: textOrNull(row._superseded, '_superseded') };
}
