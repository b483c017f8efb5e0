import { setTimeout as sleep } from 'node:timers/promises';
import type { Job, JobEvent } from '../queue/index.ts';
import type { ClockStack } from './clock-stack.ts';

/** Terminal job statuses: a figure waits for its jobs to reach one of these. */
const TERMINAL = ['done', 'failed', 'cancelled'];

/** Polls the jobs (through the stack's own engine) until every one has ended, or fails naming how many are open. */
export async function waitEnded(stack: ClockStack, ids: string[], timeoutMs: number): Promise<Array<{ job: Job; events: JobEvent[] }>> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const found = await Promise.all(ids.map((id) => stack.engine.getJob(stack.probe, id)));
    const open = found.filter((f) => !f || !TERMINAL.includes(f.job.status)).length;
    if (open === 0) return found as Array<{ job: Job; events: JobEvent[] }>;
    if (performance.now() > deadline) throw new Error(`${stack.label}: ${open} of ${ids.length} jobs not ended after ${timeoutMs / 1000} s`);
    await sleep(250);
  }
}

/** When the job was first claimed (epoch ms); a job that ended unclaimed (cancelled while queued) fails the figure. */
export function startedAt(stack: ClockStack, job: Job): number {
  if (!job.startedAt) throw new Error(`${stack.label}: job ${job.id} (${job.type}) ended ${job.status} without being claimed`);
  return job.startedAt.getTime();
}

/** Sorted offsets (ms) at uniformly random moments of a window: when a figure inserts its jobs. */
export function randomOffsets(count: number, windowMs: number, random: () => number = Math.random): number[] {
  return Array.from({ length: count }, () => Math.floor(random() * windowMs)).sort((a, b) => a - b);
}

/** Runs `act(i)` at each offset from now (all stacks of a run share the offsets, so they meet the same minute phases). */
export async function atOffsets<T>(offsets: number[], act: (i: number) => Promise<T>): Promise<T[]> {
  const start = performance.now();
  const out: T[] = [];
  for (const [i, offset] of offsets.entries()) {
    const wait = start + offset - performance.now();
    if (wait > 0) await sleep(wait);
    out.push(await act(i));
  }
  return out;
}

/** Seconds into the wall-clock minute (the cron driver ticks at :00). */
export const minutePhase = (epochMs: number) => (epochMs % 60_000) / 1000;
