// What one dispatcher alarm does with its invocation: drain what is due in slices, waking more
// shards while more is due than one invocation runs at once, then say when to look again.
import { countDueSteps, nextDueInMs, runSteps, type RunCounts } from '../../queue/index.ts';
import { stepRunner, type Invocation } from '../invocation.ts';
import { PRIMARY_SHARD, type AlarmReport } from './names.ts';

/**
 * A drain runs in slices this long: between slices it re-reads how much is due, so a burst that
 * arrives mid-drain fans out within a slice rather than after the whole budget.
 */
export const SLICE_MS = 2_000;

export interface AlarmDrain {
  counts: RunCounts;
  report: AlarmReport;
  /** Epoch ms for the next alarm; null: leave the shard unarmed. */
  nextAt: number | null;
  /** Nothing was due: the alarm only looked (an idle poll). */
  idle: boolean;
}

/** Wakes shard `shard` of this pool for now; the caller's Durable Object call. */
export type WakeShard = (shard: number) => Promise<unknown>;

/**
 * Long because it is the alarm's one loop: due? → fan out → drain a slice → again, with each exit
 * (nothing due, blocked, a budget spent) deciding when the shard looks next.
 */
export async function drainForAlarm(inv: Invocation, shard: number, wakeShard: WakeShard): Promise<AlarmDrain> {
  const { sql, config, usage } = inv;
  const counts: RunCounts = { claimed: 0, done: 0, continued: 0, retried: 0, failed: 0, cancelled: 0, lost: 0, released: 0 };
  const woke = new Set<number>();
  let stoppedBy: AlarmReport['stoppedBy'] = 'drained';
  let idle = true;
  let dueIn = await nextDueInMs(sql, config.pool);
  while (dueIn !== null && dueIn <= 0) {
    const spent = usage.exhausted();
    if (spent) {
      stoppedBy = spent.budget;
      break;
    }
    idle = false;
    // One invocation runs stepConcurrency steps at once: more due than that wakes more shards.
    const cap = config.dispatchShards * config.stepConcurrency + 1;
    const due = await countDueSteps(sql, config.pool, cap);
    const wanted = Math.min(config.dispatchShards, Math.ceil(due / config.stepConcurrency));
    const asleep = Array.from({ length: wanted }, (_, s) => s).filter((s) => s !== shard && !woke.has(s));
    for (const s of asleep) woke.add(s);
    await Promise.all(asleep.map((s) => wakeShard(s).catch((error: unknown) => inv.log({ level: 'warn', msg: `waking dispatcher shard ${s} failed`, error: String(error) }))));
    const slice = await runSteps(stepRunner(inv), { budgetMs: SLICE_MS, stopClaiming: () => usage.exhausted() !== null });
    for (const k of Object.keys(counts) as Array<keyof RunCounts>) counts[k] += slice[k];
    if (slice.claimed === 0) {
      stoppedBy = usage.exhausted()?.budget ?? 'blocked';
      break;
    }
    dueIn = await nextDueInMs(sql, config.pool);
  }
  const nextAt = nextAlarmAt(inv, shard, stoppedBy, dueIn);
  return {
    counts,
    idle,
    nextAt,
    report: { claimed: counts.claimed, stoppedBy, woke: [...woke].sort((a, b) => a - b), nextAt: nextAt === null ? null : new Date(nextAt).toISOString() },
  };
}

/**
 * When the shard looks next. A spent budget continues at once in a fresh invocation (with fresh
 * limits). Shard 0 keeps the clock: the next due step, but never later than the idle poll, so a
 * job inserted with plain SQL (which wakes nobody) is found within IDLE_POLL_MS. Blocked work is
 * looked at again after the idle poll, not in a loop. The other shards sleep once their burst is
 * done: shard 0 wakes them again when one is needed.
 */
function nextAlarmAt(inv: Invocation, shard: number, stoppedBy: AlarmReport['stoppedBy'], dueIn: number | null): number | null {
  const now = Date.now();
  if (stoppedBy === 'cpu' || stoppedBy === 'subrequests') return now;
  const poll = inv.config.idlePollMs > 0 ? now + inv.config.idlePollMs : null;
  if (shard !== PRIMARY_SHARD) return null;
  if (stoppedBy === 'blocked' || dueIn === null) return poll;
  const due = now + Math.max(0, dueIn);
  return poll === null ? due : Math.min(due, poll);
}

/** After `failuresInRow` failed alarms (the database unreachable, say): 1 s, doubling to a minute. */
export function retryAfterFailureMs(failuresInRow: number): number {
  return Math.min(60_000, 1_000 * 2 ** Math.max(0, failuresInRow - 1));
}
