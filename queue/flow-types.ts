// What a job type declares of flow control (0210): a rate limit per key and a fairness key,
// checked where the type is written and turned into the worker.rate_limits rows the sync stores.
import type { RateLimitRow } from './driver/job-types.ts';
import type { JobType } from './registry.ts';

/** What worker.job_types accepts as a fairness key template (a concurrency key's shape). */
const KEY_TEMPLATE = /^[^{}]+(\{[A-Za-z_][A-Za-z0-9_]*\}[^{}]*)*$/;

export interface TypeRateLimit {
  /** A literal key: `provider:digitalocean`. */
  key: string;
  limit: number;
  /** The window: `'30s'`, `'1m'`, `'1h'`, `'1d'`, or milliseconds (1 s to 7 days). */
  per: string | number;
}

const PER_UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** A rate limit's window in milliseconds, or null when `per` is not one worker.rate_limits accepts. */
export function rateWindowMs(per: string | number): number | null {
  let ms: number;
  if (typeof per === 'number') ms = per;
  else {
    const m = /^(\d+)(ms|s|m|h|d)$/.exec(per);
    if (!m) return null;
    ms = Number(m[1]) * PER_UNITS[m[2]!]!;
  }
  return Number.isInteger(ms) && ms >= 1000 && ms <= 7 * 86_400_000 ? ms : null;
}

/** A declaration the sync would fail to store is refused where it is written, naming the type. */
export function checkFlowControl(t: JobType<any>): void {
  const r = t.rateLimit;
  if (r !== undefined) {
    if (typeof r.key !== 'string' || r.key.length < 1 || r.key.length > 200 || /[{}]/.test(r.key)) {
      throw new Error(`job type ${t.type}: rateLimit.key must be 1 to 200 characters of literal text (no {field}), got ${JSON.stringify(r.key)}`);
    }
    if (!Number.isInteger(r.limit) || r.limit < 1 || r.limit > 100_000) {
      throw new Error(`job type ${t.type}: rateLimit.limit must be an integer from 1 to 100000, got ${r.limit}`);
    }
    if (rateWindowMs(r.per) === null) {
      throw new Error(`job type ${t.type}: rateLimit.per must be 1 s to 7 days ('10s', '1m', '1h', '1d' or milliseconds), got ${JSON.stringify(r.per)}`);
    }
  }
  if (t.fairness !== undefined && (!KEY_TEMPLATE.test(t.fairness.key) || t.fairness.key.length > 200)) {
    throw new Error(`job type ${t.type}: fairness.key must be literal text with {field} placeholders, starting with literal text (e.g. account:{accountId}), got ${JSON.stringify(t.fairness.key)}`);
  }
}

/** The rate limits the types declare, one per key; two types naming one key must agree on it. */
export function rateLimitRows(types: JobType<unknown>[]): RateLimitRow[] {
  const byKey = new Map<string, RateLimitRow & { type: string }>();
  for (const t of types) {
    if (!t.rateLimit) continue;
    const row = { key: t.rateLimit.key, max_starts: t.rateLimit.limit, per_ms: rateWindowMs(t.rateLimit.per)!, type: t.type };
    const seen = byKey.get(row.key);
    if (seen && (seen.max_starts !== row.max_starts || seen.per_ms !== row.per_ms)) {
      throw new Error(`job types ${seen.type} and ${t.type} declare rate key ${row.key} with different limits`);
    }
    byKey.set(row.key, row);
  }
  return [...byKey.values()].map(({ key, max_starts, per_ms }) => ({ key, max_starts, per_ms }));
}

