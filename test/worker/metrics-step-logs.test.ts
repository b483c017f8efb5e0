import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createWorkerHarness, type WorkerHarness } from './support.ts';

/**
 * Structured logs: one JSON line per step, and never a secret — even when a step's error echoes
 * one (the canary is a configured secret the failing job quotes in its error).
 */
const CANARY = 'canary-depot-token-5f1c9e';
const QUOTED_CANARY = 'canary"with\\escapes-77';

let h: WorkerHarness;
beforeAll(async () => {
  h = await createWorkerHarness({ LOG_STEPS: 'true', DEPOT_TOKEN: CANARY, STRIPE_WEBHOOK_SECRET: QUOTED_CANARY } as never);
});
afterEach(() => vi.restoreAllMocks());

function capture() {
  const lines: string[] = [];
  vi.spyOn(console, 'log').mockImplementation((...args: unknown[]) => void lines.push(args.map(String).join(' ')));
  vi.spyOn(console, 'error').mockImplementation((...args: unknown[]) => void lines.push(args.map(String).join(' ')));
  return lines;
}

describe('step logs', () => {
  it('writes one JSON line per step with job id, type, step, outcome, duration and attempt', async () => {
    const lines = capture();
    const res = await h.request('/v1/jobs', { method: 'POST', json: { type: 'countdown', payload: { n: 1 } } });
    const { job } = (await res.json()) as { job: { id: string } };
    const steps = lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.jobId === job.id);
    expect(steps).toHaveLength(2);
    expect(steps.map((s) => [s.step, s.outcome, s.attempt])).toEqual([['start', 'continued', 1], ['count', 'done', 1]]);
    for (const s of steps) {
      expect(s).toMatchObject({ jobId: job.id, type: 'countdown' });
      expect(typeof s.durationMs).toBe('number');
      expect(Object.keys(s)).not.toContain('payload');
    }
  });

  it('scrubs secret values out of errors in step lines and alert lines, raw or JSON-escaped', async () => {
    const lines = capture();
    const message = `upstream said: bad credentials ${CANARY} / ${QUOTED_CANARY}`;
    const res = await h.request('/v1/jobs', { method: 'POST', json: { type: 'fail', payload: { message }, maxAttempts: 1 } });
    const { job } = (await res.json()) as { job: { id: string } };
    const step = lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.jobId === job.id && 'outcome' in l);
    expect(step).toMatchObject({ type: 'fail', outcome: 'failed', attempt: 1, error: 'upstream said: bad credentials [redacted] / [redacted]' });
    expect(lines.some((l) => l.includes('"level":"alert"') && l.includes(job.id))).toBe(true);
    const all = lines.join('\n');
    expect(all).not.toContain(CANARY);
    expect(all).not.toContain('canary\\"with');
    expect(all).not.toContain(QUOTED_CANARY);
  });
});
