import type { Sql } from '../../queue/index.ts';
import { lockJobRow } from '../../queue/driver/tables.ts';

/**
 * Run statements on separate connections in a fixed interleaving of lock waits, the same on
 * every run: each step starts once the one before it waits for a lock or has finished; a `hold`
 * step locks one job's row in a transaction that changes nothing (a transaction stalled between
 * two statements) and lets go once every other step waits for a lock or has finished. Used by the
 * model-based test's staged rounds and by the lock-order tests.
 */

export type StagedStep =
  | { sql: Sql; hold: string }
  | { sql: Sql; run: (sql: Sql) => Promise<unknown> };

/** How long a step may take to reach a lock wait before the next one starts anyway. */
const STAGE_WAIT_MS = 5_000;

export async function runStaged(observer: Sql, steps: StagedStep[]): Promise<Array<PromiseSettledResult<unknown>>> {
  const pids = await Promise.all(steps.map((s) => backendPid(s.sql)));
  let release!: () => void;
  const released = new Promise<void>((resolve) => { release = resolve; });
  const finished = new Set<number>();
  const started: Array<Promise<unknown>> = [];
  for (const [i, step] of steps.entries()) {
    if ('hold' in step) {
      let acquired!: () => void;
      const holding = new Promise<void>((resolve) => { acquired = resolve; });
      started.push(step.sql.begin(async (tx) => {
        await lockJobRow(tx, step.hold);
        acquired();
        await released;
      }).finally(() => finished.add(i)));
      await Promise.race([holding, started[i]!.catch(() => {})]);
    } else {
      started.push(step.run(step.sql).finally(() => finished.add(i)));
      await untilWaiting(observer, [pids[i]!], () => finished.has(i));
    }
  }
  const others = steps.flatMap((s, i) => ('hold' in s ? [] : [i]));
  await untilWaiting(observer, others.filter((i) => !finished.has(i)).map((i) => pids[i]!), () => others.every((i) => finished.has(i)));
  release();
  return Promise.allSettled(started);
}

/** Until every backend of `pids` waits for a lock, or `done()`, or STAGE_WAIT_MS passed. */
async function untilWaiting(observer: Sql, pids: number[], done: () => boolean): Promise<void> {
  const until = Date.now() + STAGE_WAIT_MS;
  while (!done() && Date.now() < until) {
    const [row] = await observer`select count(*)::int as n from pg_stat_activity where pid = any(${pids}::int[]) and wait_event_type = 'Lock'`;
    if ((row as { n: number }).n === pids.length) return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

async function backendPid(sql: Sql): Promise<number> {
  const [row] = await sql`select pg_backend_pid() as pid`;
  return (row as { pid: number }).pid;
}
