import { createExecutionContext, createScheduledController, env, waitOnExecutionContext } from 'cloudflare:test';
import { afterAll } from 'vitest';
import { readConfig, type WorkerEnv } from '../../functions/config.ts';
import { connectInWorker } from '../../functions/cloudflare-socket.ts';
import { dispatcherStatuses, disarmDispatcher } from '../../functions/dispatch/wake.ts';
import type { DispatcherStatus } from '../../functions/dispatch/names.ts';
import worker from '../../functions/index.ts';
import type { Sql } from '../../queue/index.ts';
import { requestThrough, type RequestInitWith } from '../worker/support.ts';

export interface ClockHarness {
  /** A pool of this file's own: its dispatchers and its jobs are no other file's. */
  pool: string;
  env: WorkerEnv;
  sql: Sql;
  /** A request through the Worker's fetch handler (as POOL = this pool); waits for its waitUntil work. */
  request(path: string, init?: RequestInitWith): Promise<Response>;
  /** The per-minute tick through the Worker's scheduled handler. */
  tick(): Promise<void>;
  statuses(): Promise<DispatcherStatus[]>;
  /** Jobs of this pool inserted with plain SQL (no HTTP request, nobody woken). */
  insert(jobs: Array<{ type: string; payload: unknown; runAt?: Date }>): Promise<string[]>;
  /** Polls (real time: the behaviour under test is the alarms' own timing) until `check` holds or `ms` pass. */
  waitFor<T>(check: () => Promise<T | null | undefined | false>, ms: number): Promise<T>;
}

const harnesses: ClockHarness[] = [];
afterAll(async () => {
  // every shard of every pool used here stops its clock; the database is dropped by the global teardown
  for (const h of harnesses.splice(0)) {
    const shards = readConfig(h.env).dispatchShards;
    for (let shard = 0; shard < shards; shard++) await disarmDispatcher(h.env, h.pool, shard);
    await h.sql`update worker.jobs set status = 'cancelled', finished_at = now() where pool = ${h.pool} and finished_at is null`;
    await h.sql.end({ timeout: 1 }).catch(() => {});
  }
});

export function createClockHarness(label: string): ClockHarness {
  const pool = `${label}-${crypto.randomUUID().slice(0, 8)}`;
  const harnessEnv = { ...(env as unknown as WorkerEnv), POOL: pool } as WorkerEnv;
  const sql = connectInWorker(harnessEnv.HYPERDRIVE.connectionString, { max: 3 });
  const h: ClockHarness = {
    pool,
    env: harnessEnv,
    sql,
    request: (path, init) => requestThrough(harnessEnv, path, init),
    async tick() {
      const ctx = createExecutionContext();
      await worker.scheduled(createScheduledController({ cron: '* * * * *', scheduledTime: new Date() }), harnessEnv, ctx);
      await waitOnExecutionContext(ctx);
    },
    statuses: () => dispatcherStatuses(harnessEnv, pool, readConfig(harnessEnv).dispatchShards),
    async insert(jobs) {
      const rows = jobs.map((j) => ({ type: j.type, payload: j.payload, pool, ...(j.runAt ? { runAt: j.runAt.toISOString() } : {}) }));
      const ids = await sql<{ id: string }[]>`select j->>'id' as id from worker.enqueue_jobs(${sql.json(rows as never)}::jsonb) as t(j)`;
      return ids.map((r) => r.id);
    },
    async waitFor(check, ms) {
      const until = Date.now() + ms;
      for (;;) {
        const value = await check();
        if (value) return value as never;
        if (Date.now() > until) throw new Error(`not within ${ms} ms`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
  };
  harnesses.push(h);
  return h;
}
