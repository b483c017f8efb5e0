import type { Queryable } from '../db.ts';
import type { Job } from '../job.ts';
import type { ClaimOptions } from '../claim.ts';
import type { Completion } from '../settle.ts';
import { parseClaimedJob, parseJobRow, record, text } from './rows.ts';
import { completionsJson } from './settle.ts';

/** The claim statements: each is one round trip to a SQL function (migrations/functions/). */

/**
 * The p_types argument (null takes every type) as a text[] literal: a client that did not fetch
 * the server's types (fetch_types: false, as the Worker's) cannot serialize a JS array.
 */
function typesParam(options: ClaimOptions): string | null {
  if (options.types === undefined) return null;
  return `{${options.types.map((t) => `"${t.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`).join(',')}}`;
}

/** worker.claim_jobs: the claimed rows. */
export async function claimRows(sql: Queryable, options: ClaimOptions): Promise<Job[]> {
  const rows = await sql`
    select * from worker.claim_jobs(${options.workerId}, ${options.pool ?? null}, ${options.limit}::int,
                                    ${options.now ?? null}::timestamptz, ${typesParam(options)}::text[])`;
  return rows.map(parseJobRow);
}

/** worker.settle_and_claim: the ids whose completion's fence held, and the claimed jobs. */
export async function settleAndClaimRows(sql: Queryable, completions: Completion[], options: ClaimOptions): Promise<{ settled: Set<string>; jobs: Job[] }> {
  const [row] = await sql`
    select worker.settle_and_claim(${sql.json(completionsJson(completions))}::jsonb, ${options.workerId}, ${options.pool ?? null},
                                   ${options.limit}::int, ${options.now ?? null}::timestamptz, ${typesParam(options)}::text[]) as r`;
  const r = record(record(row, 'settle_and_claim row').r, 'settle_and_claim result');
  if (!Array.isArray(r.settled) || !Array.isArray(r.jobs)) throw new Error('settle_and_claim returned no settled/jobs arrays: migrations and queue/driver/claim.ts disagree');
  return { settled: new Set(r.settled.map((id: unknown) => text(id, 'settled'))), jobs: r.jobs.map(parseClaimedJob) };
}
