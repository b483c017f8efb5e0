import type { ClockStack } from './clock-stack.ts';
import { atOffsets, minutePhase, startedAt, waitEnded } from './clock-wait.ts';
import { median } from './stats.ts';

/**
 * Jobs inserted with SQL (the engine's enqueue on the stack's database, as another service would:
 * no HTTP request, so no kick), one at a time at the given moments, the stack otherwise idle:
 * how long each waits for an invocation to find it.
 */
export interface SqlInsertResult {
  jobs: number;
  /** created_at → started_at (the first claim), per job in insert order. */
  waitsSeconds: number[];
  worstSeconds: number;
  medianSeconds: number;
  /** Seconds into the minute of each insert. */
  phases: number[];
}

export async function sqlInsertLatency(stack: ClockStack, offsetsMs: number[]): Promise<SqlInsertResult> {
  const ids = await atOffsets(offsetsMs, async () => {
    const { job } = await stack.engine.enqueue(stack.probe, { type: 'uppercase', payload: { text: 'clock' } });
    return job.id;
  });
  const ended = await waitEnded(stack, ids, 180_000);
  const waits = ended.map(({ job }) => (startedAt(stack, job) - job.createdAt.getTime()) / 1000);
  return {
    jobs: ids.length,
    waitsSeconds: waits,
    worstSeconds: Math.max(...waits),
    medianSeconds: median(waits),
    phases: ended.map(({ job }) => minutePhase(job.createdAt.getTime())),
  };
}
