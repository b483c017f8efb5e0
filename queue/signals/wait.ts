// The wait step outcome (`waitFor`): what a step returns to park its job until an event, and
// what the resumed step sees of the event (ctx.event), read from the checkpoint keys the SQL
// functions write: `$wait` (what the job waits for; once its timeout ended it, also that end as
// the history tells it, `timedOutEvent`, until the step settles: 0260) and `$event` (how the
// wait ended).
import type { Job, Json, JsonObject } from '../job.ts';
import type { SettleEffect } from '../settle.ts';

export interface WaitOptions {
  /** The correlation key: only events sent with this key (or to this job) end the wait. */
  key?: string;
  /** Resume with a timed_out event after this long (1 ms to 30 days); without it the job waits until signalled. */
  timeoutMs?: number;
  /** The step the job resumes at (default: the event's name). */
  step?: string;
  /** State for the resumed step, merged into the checkpoint. */
  checkpoint?: JsonObject;
  /** Work in the settle's transaction, only if the fence held. */
  effect?: SettleEffect;
}

export interface WaitResult {
  outcome: 'wait';
  name: string;
  step: string;
  key?: string;
  timeoutMs?: number;
  checkpoint?: JsonObject;
  effect?: SettleEffect;
}

const MAX_TIMEOUT_MS = 30 * 86_400_000;

/**
 * End the step waiting for the event `name`; the job resumes at `step` (default `name`) with
 * ctx.event. A malformed wait throws here, in the step (its error, retried like any).
 */
export function waitFor(name: string, options: WaitOptions = {}): WaitResult {
  if (typeof name !== 'string' || name.trim() === '' || name.length > 200) throw new Error('waitFor: name must be 1 to 200 characters, not blank');
  if (options.key !== undefined && (typeof options.key !== 'string' || options.key === '' || options.key.length > 500)) throw new Error('waitFor: key must be 1 to 500 characters');
  if (options.step !== undefined && (typeof options.step !== 'string' || options.step.trim() === '' || options.step.length > 200)) throw new Error('waitFor: step must be 1 to 200 characters, not blank');
  const t = options.timeoutMs;
  if (t !== undefined && (!Number.isInteger(t) || t < 1 || t > MAX_TIMEOUT_MS)) throw new Error(`waitFor: timeoutMs must be an integer from 1 to ${MAX_TIMEOUT_MS} (30 days), got ${t}`);
  return {
  outcome: 'wait',
  name,
  step: options.step ?? name,
  ...(options.key !== undefined ? { key: options.key } : {}),
  ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
  ...(options.checkpoint ? { checkpoint: options.checkpoint } : {}),
  ...(options.effect ? { effect: options.effect } : {}),
  };
}

/** How a wait ended, as the resumed step sees it. */
export type WaitEvent =
  | { outcome: 'signalled'; name: string; key: string | null; payload: Json | null; at: string }
  | { outcome: 'timed_out'; name: string; key: string | null; at: string };

/** The checkpoint keys the engine keeps for a wait; a handler's checkpoint never shows them. */
export const WAIT_KEY = '$wait';
export const EVENT_KEY = '$event';

/** The step's view of a wait: the event when the job resumed from one at this step, `unresolved` when it timed out and the end is not yet written. */
export function waitStateOf(job: Pick<Job, 'step' | 'checkpoint'>): { event?: WaitEvent; unresolved: boolean } {
  const wait = job.checkpoint[WAIT_KEY] as { step?: unknown } | undefined;
  if (!wait || typeof wait !== 'object' || wait.step !== job.step) return { unresolved: false };
  const event = job.checkpoint[EVENT_KEY] as WaitEvent | undefined;
  return event ? { event, unresolved: false } : { unresolved: true };
}

/** The checkpoint a handler sees: its own keys only. */
export function handlerCheckpoint(checkpoint: JsonObject): JsonObject {
  if (!(WAIT_KEY in checkpoint) && !(EVENT_KEY in checkpoint)) return checkpoint;
  const { [WAIT_KEY]: _wait, [EVENT_KEY]: _event, ...own } = checkpoint;
  return own;
}
