import type { Queryable } from './db.ts';
import { stepDurationBounds, stepMinuteRows } from './driver/dashboard.ts';

/**
 * Throughput, failure rate and step latency per job type over time, from worker.step_minutes
 * (0230: the roll-up's steps by the minute they ended). Each point is one bin of `binMinutes`;
 * a bin with no steps is absent, and the newest minute appears once the roll-up's lag has passed.
 */
export interface StepPoint {
  at: Date;
  /** Steps that ended in the bin, of any outcome. */
  steps: number;
  /** Jobs whose last step ended done in the bin (the job finished). */
  done: number;
  /** Steps that ended badly: retried, failed, or lost (a lease expired under them). */
  failures: number;
  /** failures / steps. */
  failureRate: number;
  /** Mean step duration, seconds. */
  meanSeconds: number;
  /** The 95th percentile's histogram bound, seconds (Infinity past the largest bound). */
  p95Seconds: number;
}

export interface TypeSeries {
  type: string;
  /** Steps in the whole window: the types are sorted by it, busiest first. */
  steps: number;
  points: StepPoint[];
}

const FAILURES = new Set(['retried', 'failed', 'lost']);

/** The bound of the quantile `q` of a histogram `counts` (by bucket index) whose bucket upper bounds are `bounds`. */
export function histogramQuantile(counts: number[], bounds: number[], q: number): number {
  const total = counts.reduce((a, b) => a + b, 0);
  if (total === 0) return 0;
  let seen = 0;
  for (let i = 0; i < counts.length; i++) {
    seen += counts[i] ?? 0;
    if (seen >= q * total) return bounds[i] ?? Infinity;
  }
  return Infinity;
}

export async function stepSeries(sql: Queryable, options: { sinceMs: number; binMinutes: number; now?: Date }): Promise<TypeSeries[]> {
  const [rows, bounds] = await Promise.all([stepMinuteRows(sql, options.sinceMs, options.binMinutes, options.now), stepDurationBounds(sql)]);
  const bins = new Map<string, Map<number, { at: Date; steps: number; done: number; failures: number; seconds: number; counts: number[] }>>();
  for (const r of rows) {
    const ofType = bins.get(r.type) ?? new Map();
    bins.set(r.type, ofType);
    const bin = ofType.get(r.at.getTime()) ?? { at: r.at, steps: 0, done: 0, failures: 0, seconds: 0, counts: [] };
    ofType.set(r.at.getTime(), bin);
    bin.steps += r.steps;
    bin.seconds += r.seconds;
    if (r.outcome === 'done') bin.done += r.steps;
    if (FAILURES.has(r.outcome)) bin.failures += r.steps;
    bin.counts[r.bucket] = (bin.counts[r.bucket] ?? 0) + r.steps;
  }
  const series = [...bins].map(([type, ofType]): TypeSeries => {
    const points = [...ofType.values()].sort((a, b) => a.at.getTime() - b.at.getTime()).map((b) => ({
      at: b.at,
      steps: b.steps,
      done: b.done,
      failures: b.failures,
      failureRate: b.steps ? b.failures / b.steps : 0,
      meanSeconds: b.steps ? b.seconds / b.steps : 0,
      p95Seconds: histogramQuantile(Array.from(b.counts, (n) => n ?? 0), bounds, 0.95),
    }));
    return { type, steps: points.reduce((n, p) => n + p.steps, 0), points };
  });
  return series.sort((a, b) => b.steps - a.steps || a.type.localeCompare(b.type));
}
