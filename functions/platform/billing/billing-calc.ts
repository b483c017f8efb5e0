/**
 * The billing rules, as pure functions (no database, no Stripe): what an account owes for one
 * period. Periods are UTC calendar months written 'YYYY-MM'; money is integer cents.
 *
 * Rules:
 * - **Plan**: the plan billed for period P is the plan in force for P: the account's plan
 *   schedule entry with the latest `fromPeriod` <= P. A change requested during P is scheduled
 *   from P+1 (platform.change_plan), so it first shows on the invoice for P+1. The plan's
 *   monthly price is charged in full for every billed period, whatever day the account signed
 *   up or changed plan: there is no proration.
 * - **Dedicated databases**: each size-ledger snapshot's rate (cents per hour, up to 6 decimal
 *   places) applies from its effective time until the same database's next snapshot or the
 *   period's end, whichever is first; the time before the period's start is not billed. A rate
 *   of 0 is a deleted (or paused) database.
 * - **Rounding**: per database, the exact amount Σ rate × duration is summed as a rational
 *   number (micro-cents per hour × milliseconds) and rounded once, half up, to whole cents.
 *   Nothing else is ever rounded, so the invoice is exact to the cent and a line never drifts
 *   with the number of size changes in it.
 * - **Usage**: usage totals are priced upstream in whole cents; one line per metric.
 * - **Credit**: the plan's included credit covers usage (databases + metered usage) only:
 *   credit applied = min(included credit, usage). It is one negative line; it never takes the
 *   usage below zero and never reduces the plan price.
 * - Lines whose amount is 0 are left out. An invoice with no lines is not sent to Stripe.
 */

export type Period = string;

const PERIOD_RE = /^(\d{4})-(0[1-9]|1[0-2])$/;

export function isPeriod(value: string): boolean {
  return PERIOD_RE.test(value);
}

function parsePeriod(period: Period): { year: number; month: number } {
  const m = PERIOD_RE.exec(period);
  if (!m) throw new RangeError(`period must be YYYY-MM, got ${JSON.stringify(period)}`);
  return { year: Number(m[1]), month: Number(m[2]) };
}

/** [start, end) of the period, in UTC. */
export function periodBounds(period: Period): { start: Date; end: Date } {
  const { year, month } = parsePeriod(period);
  return { start: new Date(Date.UTC(year, month - 1, 1)), end: new Date(Date.UTC(year, month, 1)) };
}

/** The period a moment falls in. */
export function periodOf(at: Date): Period {
  return `${String(at.getUTCFullYear()).padStart(4, '0')}-${String(at.getUTCMonth() + 1).padStart(2, '0')}`;
}

/** The period before the one `at` falls in: what the month-end run bills. */
export function previousPeriod(at: Date): Period {
  return periodOf(new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth() - 1, 1)));
}

export function nextPeriod(period: Period): Period {
  return periodOf(periodBounds(period).end);
}

export interface PlanScheduleEntry {
  fromPeriod: Period;
  planId: string;
}

/** The plan billed for `period`, or null when the account had no plan yet (signed up later). */
export function planForPeriod(schedule: readonly PlanScheduleEntry[], period: Period): string | null {
  parsePeriod(period);
  let best: PlanScheduleEntry | null = null;
  // 'YYYY-MM' strings order like the months they name.
  for (const entry of schedule) if (entry.fromPeriod <= period && (!best || entry.fromPeriod > best.fromPeriod)) best = entry;
  return best?.planId ?? null;
}

export interface Plan {
  id: string;
  name: string;
  monthlyPriceCents: number;
  includedCreditCents: number;
}

export interface SizeSnapshot {
  databaseId: string;
  /** A decimal string with at most 6 decimal places (Postgres numeric(14,6) as postgres.js returns it). */
  centsPerHour: string;
  effectiveFrom: Date;
}

export interface UsageTotal {
  metric: string;
  /** A decimal string (shown on the line, not used for the amount). */
  quantity: string;
  cents: number;
}

export const LINE_KINDS = ['plan', 'database', 'usage', 'credit'] as const;
export type LineKind = (typeof LINE_KINDS)[number];

/** A type, not an interface: JSON-compatible as it is (frozen in platform.invoices.lines, jsonb). */
export type InvoiceLine = {
  /** Stable within (account, period): the idempotency key of the line's Stripe item derives from it. */
  key: string;
  kind: LineKind;
  description: string;
  amountCents: number;
};

export interface InvoiceComputation {
  period: Period;
  planId: string;
  lines: InvoiceLine[];
  planCents: number;
  usageCents: number;
  creditAppliedCents: number;
  totalCents: number;
}

const MICROS = 1_000_000n;
const MS_PER_HOUR = 3_600_000n;
const RATE_RE = /^(\d{1,8})(?:\.(\d{1,6}))?$/;

/** A decimal rate as integer micro-cents per hour, exactly (never through a float). */
export function rateMicros(centsPerHour: string): bigint {
  const m = RATE_RE.exec(centsPerHour.trim());
  if (!m) throw new RangeError(`cents per hour must be a non-negative decimal with at most 6 decimal places, got ${JSON.stringify(centsPerHour)}`);
  const [, whole = '0', fraction = ''] = m;
  return BigInt(whole) * MICROS + BigInt(fraction.padEnd(6, '0'));
}

/** numerator / denominator rounded half up (both non-negative). */
function roundHalfUp(numerator: bigint, denominator: bigint): bigint {
  return (2n * numerator + denominator) / (2n * denominator);
}

function toCents(value: bigint): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n)) throw new RangeError(`amount ${value} cents is out of range`);
  return n;
}

export interface DatabaseCharge {
  databaseId: string;
  /** Time in the period at a non-zero rate, in milliseconds (what the line's description shows). */
  billedMs: number;
  cents: number;
}

/** Materialize each database's cents for the period from its ledger snapshots (any order, any span). */
export function databaseCharges(snapshots: readonly SizeSnapshot[], period: Period): DatabaseCharge[] {
  const { start, end } = periodBounds(period);
  const byDatabase = new Map<string, SizeSnapshot[]>();
  for (const s of snapshots) {
    const list = byDatabase.get(s.databaseId) ?? [];
    list.push(s);
    byDatabase.set(s.databaseId, list);
  }
  const charges: DatabaseCharge[] = [];
  for (const [databaseId, list] of [...byDatabase].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    const ordered = [...list].sort((a, b) => a.effectiveFrom.getTime() - b.effectiveFrom.getTime());
    let microCentMs = 0n; // Σ rate (micro-cents/h) × duration (ms): exact
    let billedMs = 0;
    ordered.forEach((snapshot, i) => {
      const from = Math.max(snapshot.effectiveFrom.getTime(), start.getTime());
      const until = Math.min(ordered[i + 1]?.effectiveFrom.getTime() ?? Infinity, end.getTime());
      const rate = rateMicros(snapshot.centsPerHour);
      if (until <= from || rate === 0n) return;
      microCentMs += rate * BigInt(until - from);
      billedMs += until - from;
    });
    if (billedMs === 0) continue;
    charges.push({ databaseId, billedMs, cents: toCents(roundHalfUp(microCentMs, MICROS * MS_PER_HOUR)) });
  }
  return charges;
}

function formatHours(ms: number): string {
  return `${Number((ms / 3_600_000).toFixed(2))} h`;
}

/** Every line of the account's invoice for the period, and the totals. */
export function computeInvoice(input: { period: Period; plan: Plan; snapshots: readonly SizeSnapshot[]; usage: readonly UsageTotal[] }): InvoiceComputation {
  const { period, plan } = input;
  const lines: InvoiceLine[] = [];
  lines.push({ key: 'plan', kind: 'plan', description: `${plan.name} plan (${period})`, amountCents: plan.monthlyPriceCents });
  for (const charge of databaseCharges(input.snapshots, period)) {
    lines.push({
      key: `database:${charge.databaseId}`,
      kind: 'database',
      description: `Dedicated database ${charge.databaseId} (${formatHours(charge.billedMs)})`,
      amountCents: charge.cents,
    });
  }
  for (const u of [...input.usage].sort((a, b) => (a.metric < b.metric ? -1 : a.metric > b.metric ? 1 : 0))) {
    if (!Number.isSafeInteger(u.cents) || u.cents < 0) throw new RangeError(`usage ${u.metric}: cents must be a non-negative integer, got ${u.cents}`);
    lines.push({ key: `usage:${u.metric}`, kind: 'usage', description: `${u.metric.replace(/_/g, ' ')}: ${u.quantity}`, amountCents: u.cents });
  }
  const usageCents = lines.filter((l) => l.kind === 'database' || l.kind === 'usage').reduce((sum, l) => sum + l.amountCents, 0);
  const creditAppliedCents = Math.min(plan.includedCreditCents, usageCents);
  lines.push({ key: 'credit', kind: 'credit', description: `Included usage credit (${plan.name} plan)`, amountCents: -creditAppliedCents });
  const billed = lines.filter((l) => l.amountCents !== 0);
  return {
    period,
    planId: plan.id,
    lines: billed,
    planCents: plan.monthlyPriceCents,
    usageCents,
    creditAppliedCents,
    totalCents: billed.reduce((sum, l) => sum + l.amountCents, 0),
  };
}
