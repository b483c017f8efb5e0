import { expect } from 'vitest';
import type { Sql } from '../../queue/index.ts';

/** Rows an enqueue writes: a refused one must leave every count as it was. */
async function enqueueWrites(sql: Sql) {
  const [row] = await sql`
    select (select count(*)::int from worker.jobs) as jobs, (select count(*)::int from worker.job_history) as events,
           (select count(*)::int from worker.concurrency_keys) as concurrency_keys,
           (select count(*)::int from worker.submit_keys) as submit_keys`;
  return row;
}

/** Runs `act`, expects SB400 naming `column` with a message matching `message`, and no write. */
export async function expectSqlRefusal(sql: Sql, act: () => Promise<unknown>, column: string, message: RegExp) {
  const before = await enqueueWrites(sql);
  const error = (await act().then(() => null, (e) => e)) as { code?: string; column_name?: string; message: string } | null;
  expect(error, `expected a refusal naming ${column}`).not.toBeNull();
  expect(error!.code).toBe('SB400');
  expect(error!.column_name).toBe(column);
  expect(error!.message).toMatch(message);
  expect(await enqueueWrites(sql)).toEqual(before);
}
