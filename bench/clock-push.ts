import { randomBytes } from 'node:crypto';
import type { ClockStack } from './clock-stack.ts';
import { atOffsets, startedAt, waitEnded } from './clock-wait.ts';
import { percentile } from './stats.ts';

/**
 * Pushes through the API (`POST /v1/pushes` for the seeded svc-demo, each on its own branch so
 * none supersedes another): the build job waits out the push's debounce (its runAt), then its
 * first step should start. The sandbox Depot is told to answer each build after one poll.
 */
export interface PushResult {
  pushes: number;
  /** The build's first claim (started_at) − the runAt the push answered, per push. */
  lateSeconds: number[];
  p50Seconds: number;
  p99Seconds: number;
  /** How the builds ended (all `done` when the Depot script succeeds). */
  statuses: Record<string, number>;
}

/** A short build, so the figure measures the first step's start rather than a long build's polls. */
const DEPOT_SCRIPT = { serviceId: 'svc-demo', outcome: 'succeed', polls: 1, lines: 2 };

export async function pushedBuilds(stack: ClockStack, offsetsMs: number[]): Promise<PushResult> {
  const scripted = await fetch(`${stack.sandboxUrl}/_sandbox/depot/script`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(DEPOT_SCRIPT),
  });
  if (!scripted.ok) throw new Error(`${stack.label}: the sandbox Depot refused the build script: ${scripted.status} ${await scripted.text()}`);
  const run = randomBytes(3).toString('hex');
  const pushed = await atOffsets(offsetsMs, async (i) => {
    const res = await stack.api('/v1/pushes', {
      method: 'POST',
      body: JSON.stringify({ accountId: 'acct-demo', serviceId: 'svc-demo', branch: `bench-${run}-${i}`, commitSha: randomBytes(4).toString('hex') }),
    });
    if (res.status !== 201) throw new Error(`${stack.label}: POST /v1/pushes answered ${res.status}: ${await res.text()}`);
    const { job } = (await res.json()) as { job: { id: string; runAt: string } };
    return { id: job.id, runAt: Date.parse(job.runAt) };
  });
  const ended = await waitEnded(stack, pushed.map((p) => p.id), 300_000);
  const late = ended.map(({ job }, i) => (startedAt(stack, job) - pushed[i]!.runAt) / 1000);
  const statuses: Record<string, number> = {};
  for (const { job } of ended) statuses[job.status] = (statuses[job.status] ?? 0) + 1;
  return { pushes: pushed.length, lateSeconds: late, p50Seconds: percentile(late, 50), p99Seconds: percentile(late, 99), statuses };
}
