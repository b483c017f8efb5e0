import type { ClockStack } from './clock-stack.ts';
import { minutePhase, waitEnded } from './clock-wait.ts';

/**
 * A multi-step job inserted with SQL (the engine's enqueue, no HTTP request, so no kick): the
 * built-in `countdown` with `n` steps, each a `continue` with `delayMs` and its step number as
 * checkpoint, then a last claim that finishes it (n + 1 claims, n delays). Every tree registers
 * `countdown`, so the figure exists for the base too.
 */
export interface MultiStepResult {
  steps: number;
  delayMs: number;
  /** Seconds into the minute when it was inserted. */
  insertedAtPhase: number;
  /** created_at → finished_at. */
  totalSeconds: number;
  /** totalSeconds over the delays alone (n × delayMs): 1.0 would be a clock that wastes nothing. */
  ratioToDelays: number;
  claims: number;
  /** Longest time between two consecutive claims (the job's `claimed` events). */
  longestGapSeconds: number;
  /** created_at → first claim. */
  firstClaimSeconds: number;
  status: string;
}

export async function multiStepJob(stack: ClockStack, steps: number, delayMs: number): Promise<MultiStepResult> {
  const { job } = await stack.engine.enqueue(stack.probe, { type: 'countdown', payload: { n: steps, delayMs } });
  // every step waits for some invocation: the base (tick + kick) may need minutes
  const [ended] = await waitEnded(stack, [job.id], 120_000 + steps * (delayMs + 60_000));
  const { job: row, events } = ended!;
  const claims = events.filter((e) => e.kind === 'claimed').map((e) => e.at.getTime());
  let longestGap = 0;
  for (let i = 1; i < claims.length; i++) longestGap = Math.max(longestGap, claims[i]! - claims[i - 1]!);
  const totalSeconds = (row.finishedAt!.getTime() - row.createdAt.getTime()) / 1000;
  return {
    steps,
    delayMs,
    insertedAtPhase: minutePhase(row.createdAt.getTime()),
    totalSeconds,
    ratioToDelays: totalSeconds / ((steps * delayMs) / 1000),
    claims: claims.length,
    longestGapSeconds: longestGap / 1000,
    firstClaimSeconds: ((claims[0] ?? Number.NaN) - row.createdAt.getTime()) / 1000,
    status: row.status,
  };
}
