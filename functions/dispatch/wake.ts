// Waking a pool's dispatchers from any invocation: one Durable Object call each, counted as a subrequest.
import type { WorkerEnv } from '../config.ts';
import { currentUsage } from '../usage.ts';
import { dispatcherName, PRIMARY_SHARD, type DispatcherStatus, type WakeRequest } from './names.ts';

function stubOf(env: WorkerEnv, pool: string, shard: number) {
  const namespace = env.DISPATCHER;
  currentUsage()?.countSubrequest('durable-object');
  return namespace.get(namespace.idFromName(dispatcherName(pool, shard)));
}

/**
 * Moves the shard's alarm to `at` if that is earlier than the one set (or none is): the object
 * compares, so a wake-up for a later time, or a second one for the same time, changes nothing.
 * Returns when the alarm is now set for.
 */
export async function wakeDispatcher(env: WorkerEnv, request: WakeRequest): Promise<number> {
  return stubOf(env, request.pool, request.shard).wake(request);
}

/** The tick's backstop: arms shard 0 now if its alarm was lost (true when it had none). */
export async function ensureDispatcherArmed(env: WorkerEnv, pool: string): Promise<boolean> {
  return stubOf(env, pool, PRIMARY_SHARD).ensureArmed({ pool, shard: PRIMARY_SHARD, at: Date.now() });
}

export async function dispatcherStatuses(env: WorkerEnv, pool: string, shards: number): Promise<DispatcherStatus[]> {
  return Promise.all(Array.from({ length: shards }, (_, shard) => stubOf(env, pool, shard).status({ pool, shard, at: 0 })));
}

/** Stops a shard's clock (a pool taken out of service, a test's end); the next wake-up starts it again. */
export async function disarmDispatcher(env: WorkerEnv, pool: string, shard: number): Promise<void> {
  await stubOf(env, pool, shard).disarm();
}
