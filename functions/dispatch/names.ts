// Which Durable Object serves which part of the work: one object per (pool, shard).

/** Shard 0 of a pool keeps its clock (armed for the next due step, or the idle poll); the others take bursts. */
export const PRIMARY_SHARD = 0;

export function dispatcherName(pool: string, shard: number): string {
  return `${pool}#${shard}`;
}

/** What a dispatcher is asked to do: serve `pool` as `shard`, with an alarm at `at` (epoch ms) or earlier. */
export interface WakeRequest {
  pool: string;
  shard: number;
  at: number;
}

/** One dispatcher as `GET /v1/admin/dispatchers` shows it. */
export interface DispatcherStatus {
  pool: string;
  shard: number;
  /** When its alarm is set for (ISO time); null: not armed. */
  alarmAt: string | null;
  /** Alarms it has handled, and how many of them found nothing due (idle polls). */
  alarms: number;
  idlePolls: number;
  /** Steps its alarms claimed. */
  claimed: number;
  /** Alarms that failed (the database unreachable, say); each re-armed itself with a backoff. */
  failures: number;
  lastAlarmAt: string | null;
  /** What its last alarm did: steps claimed, why it stopped, the shards it woke, when it re-armed for. */
  last: AlarmReport | null;
}

export interface AlarmReport {
  claimed: number;
  /** `drained`: nothing more due; `blocked`: due steps none could claim (a key, a limit); a budget's name: stopped before that limit. */
  stoppedBy: 'drained' | 'blocked' | 'cpu' | 'subrequests' | 'error';
  woke: number[];
  nextAt: string | null;
  error?: string;
}
