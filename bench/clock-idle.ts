import { setTimeout as sleep } from 'node:timers/promises';
import type postgres from 'postgres';
import type { ClockStack } from './clock-stack.ts';
import { processTreeTicks } from './cpu.ts';

/**
 * What an idle stack costs, counted over a window with no work queued, scaled to one idle hour:
 * its database's transactions and sessions (pg_stat_database: every query the Worker sends is
 * in some transaction, and each invocation opens its own session), the CPU of its processes
 * (/proc), and its dispatchers' alarm invocations (GET /v1/dispatchers; a tree without
 * dispatchers answers 404 and has none).
 */
export interface IdleResult {
  seconds: number;
  /** Per idle hour. */
  transactionsPerHour: number;
  sessionsPerHour: number;
  workerdCpuMsPerHour: number;
  wranglerCpuMsPerHour: number;
  /** The `npm start` script and the sandbox providers. */
  devScriptCpuMsPerHour: number;
  /** Null when the tree has no dispatchers (the route answers 404). */
  alarmsPerHour: number | null;
  idlePollsPerHour: number | null;
}

interface Counters {
  at: number;
  transactions: number;
  sessions: number;
  cpu: Record<'workerd' | 'wrangler' | 'other', number>;
  dispatchers: { alarms: number; idlePolls: number } | null;
}

const TICK_MS = 10; // /proc counts CPU in USER_HZ (100) ticks

interface DispatcherAnswer {
  shards: Array<{ alarms: number; idlePolls: number }>;
}

/** The dispatchers' counters summed over shards, or null when the tree has none. */
async function dispatcherCounts(stack: ClockStack): Promise<Counters['dispatchers']> {
  const res = await stack.api('/v1/dispatchers');
  if (res.status === 404) {
    await res.arrayBuffer();
    return null;
  }
  if (!res.ok) throw new Error(`${stack.label}: GET /v1/dispatchers answered ${res.status}: ${await res.text()}`);
  const body = (await res.json()) as DispatcherAnswer;
  if (!Array.isArray(body.shards)) throw new Error(`${stack.label}: GET /v1/dispatchers answered no shards: ${JSON.stringify(body)}`);
  return {
    alarms: body.shards.reduce((n, s) => n + Number(s.alarms), 0),
    idlePolls: body.shards.reduce((n, s) => n + Number(s.idlePolls), 0),
  };
}

/** Read from the admin connection (another database), so the count does not include its own reads. */
async function counters(admin: postgres.Sql, stack: ClockStack): Promise<Counters> {
  const [row] = await admin`
    select xact_commit + xact_rollback as transactions, sessions
      from pg_stat_database where datname = ${stack.database}`;
  if (!row) throw new Error(`${stack.label}: no pg_stat_database row for ${stack.database}`);
  return {
    at: performance.now(),
    transactions: Number(row.transactions),
    sessions: Number(row.sessions),
    cpu: processTreeTicks(stack.rootPid),
    dispatchers: await dispatcherCounts(stack),
  };
}

/** Counts every stack over the same idle window (stacks are separate process trees and databases). */
export async function idleCost(admin: postgres.Sql, stacks: ClockStack[], seconds: number): Promise<IdleResult[]> {
  // statistics reach pg_stat_database when a backend ends or within a second of its last commit
  await sleep(1_500);
  const before = await Promise.all(stacks.map((s) => counters(admin, s)));
  await sleep(seconds * 1000);
  await sleep(1_500);
  const after = await Promise.all(stacks.map((s) => counters(admin, s)));
  return stacks.map((_, i) => {
    const a = before[i]!;
    const b = after[i]!;
    const hour = 3_600_000 / (b.at - a.at);
    const cpu = (k: keyof Counters['cpu']) => (b.cpu[k] - a.cpu[k]) * TICK_MS * hour;
    const both = a.dispatchers && b.dispatchers ? { alarms: b.dispatchers.alarms - a.dispatchers.alarms, idlePolls: b.dispatchers.idlePolls - a.dispatchers.idlePolls } : null;
    return {
      seconds: (b.at - a.at) / 1000,
      transactionsPerHour: (b.transactions - a.transactions) * hour,
      sessionsPerHour: (b.sessions - a.sessions) * hour,
      workerdCpuMsPerHour: cpu('workerd'),
      wranglerCpuMsPerHour: cpu('wrangler'),
      devScriptCpuMsPerHour: cpu('other'),
      alarmsPerHour: both ? both.alarms * hour : null,
      idlePollsPerHour: both ? both.idlePolls * hour : null,
    };
  });
}
