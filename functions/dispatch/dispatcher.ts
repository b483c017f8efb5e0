import { DurableObject } from 'cloudflare:workers';
import { errorText } from '../../queue/index.ts';
import { readConfig, type WorkerEnv } from '../config.ts';
import { envSecrets, openInvocation } from '../invocation.ts';
import { scrubText } from '../lib/redact.ts';
import { InvocationUsage, withUsage } from '../usage.ts';
import { drainForAlarm, retryAfterFailureMs } from './alarm-drain.ts';
import type { AlarmReport, DispatcherStatus, WakeRequest } from './names.ts';
import { wakeDispatcher } from './wake.ts';


interface Identity {
  pool: string;
  shard: number;
}

interface Stats {
  alarms: number;
  idlePolls: number;
  claimed: number;
  failures: number;
  /** Failures in a row, for the backoff. */
  failingSince: number;
  lastAlarmAt: string | null;
  last: AlarmReport | null;
}

const NO_STATS: Stats = { alarms: 0, idlePolls: 0, claimed: 0, failures: 0, failingSince: 0, lastAlarmAt: null, last: null };

/**
 * A pool's clock, one object per (pool, shard). Its alarm is set for the earliest moment it has
 * work: whoever makes a step due (an enqueue, a resume, a retry) wakes it for that time, and each
 * alarm drains what is due and re-arms for the next due step. Postgres stays the only record of
 * work: the alarm time is a hint, so a lost alarm (re-armed by the tick), a duplicate wake-up or
 * two shards draining at once cost a query, never a double run — claims are leased and fenced.
 */
export class Dispatcher extends DurableObject<WorkerEnv> {
  /** Sets the alarm for `request.at` unless one is set earlier. Returns when it is set for. */
  async wake(request: WakeRequest): Promise<number> {
    await this.remember(request);
    const at = Math.max(request.at, Date.now());
    const current = await this.ctx.storage.getAlarm();
    if (current !== null && current <= at) return current;
    await this.ctx.storage.setAlarm(at);
    return at;
  }

  /** Arms the alarm now if none is set; true when it had to (the alarm was lost). */
  async ensureArmed(request: WakeRequest): Promise<boolean> {
    await this.remember(request);
    if ((await this.ctx.storage.getAlarm()) !== null) return false;
    await this.ctx.storage.setAlarm(Date.now());
    return true;
  }

  async status(request: WakeRequest): Promise<DispatcherStatus> {
    const identity = (await this.ctx.storage.get<Identity>('identity')) ?? { pool: request.pool, shard: request.shard };
    const stats = (await this.ctx.storage.get<Stats>('stats')) ?? NO_STATS;
    const alarm = await this.ctx.storage.getAlarm();
    return {
      ...identity,
      alarmAt: alarm === null ? null : new Date(alarm).toISOString(),
      alarms: stats.alarms,
      idlePolls: stats.idlePolls,
      claimed: stats.claimed,
      failures: stats.failures,
      lastAlarmAt: stats.lastAlarmAt,
      last: stats.last,
    };
  }

  async disarm(): Promise<void> {
    await this.ctx.storage.deleteAlarm();
  }

  override async alarm(): Promise<void> {
    const identity = await this.ctx.storage.get<Identity>('identity');
    if (!identity) return; // armed by no wake-up: nothing to serve
    const stats = (await this.ctx.storage.get<Stats>('stats')) ?? { ...NO_STATS };
    stats.alarms++;
    stats.lastAlarmAt = new Date().toISOString();
    let nextAt: number | null;
    try {
      const config = readConfig(this.env);
      const usage = new InvocationUsage(config.budgets);
      const result = await withUsage(usage, () => this.drain(identity));
      nextAt = result.nextAt;
      stats.last = result.report;
      stats.claimed += result.report.claimed;
      if (result.idle) stats.idlePolls++;
      stats.failingSince = 0;
    } catch (error) {
      // Not rethrown: the runtime's own alarm retries give up after a few; this keeps trying, slower.
      stats.failures++;
      stats.failingSince++;
      nextAt = Date.now() + retryAfterFailureMs(stats.failingSince);
      const text = scrubText(errorText(error), envSecrets(this.env));
      stats.last = { claimed: 0, stoppedBy: 'error', woke: [], nextAt: new Date(nextAt).toISOString(), error: text };
      console.error(JSON.stringify({ level: 'error', msg: 'dispatcher alarm failed', pool: identity.pool, shard: identity.shard, error: text }));
    }
    await this.ctx.storage.put('stats', stats);
    // a wake-up during the drain may have set an earlier alarm: keep whichever comes first
    if (nextAt !== null) await this.wake({ ...identity, at: nextAt });
  }

  private async drain(identity: Identity) {
    const inv = await openInvocation(this.env, { pool: identity.pool, role: `dispatcher-${identity.shard}` });
    try {
      return await drainForAlarm(inv, identity.shard, (shard) => wakeDispatcher(this.env, { pool: identity.pool, shard, at: Date.now() }));
    } finally {
      await inv.close();
    }
  }

  private async remember(request: WakeRequest): Promise<void> {
    const known = await this.ctx.storage.get<Identity>('identity');
    if (known?.pool === request.pool && known.shard === request.shard) return;
    await this.ctx.storage.put('identity', { pool: request.pool, shard: request.shard } satisfies Identity);
  }
}
