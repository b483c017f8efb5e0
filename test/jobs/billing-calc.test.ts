import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  computeInvoice,
  databaseCharges,
  nextPeriod,
  periodBounds,
  periodOf,
  planForPeriod,
  previousPeriod,
  rateMicros,
  type Plan,
} from '../../functions/platform/billing/billing-calc.ts';

const starter: Plan = { id: 'starter', name: 'Starter', monthlyPriceCents: 2000, includedCreditCents: 500 };
const at = (iso: string) => new Date(iso);

describe('billing periods', () => {
  it('are UTC calendar months', () => {
    expect(periodBounds('2026-11')).toEqual({ start: at('2026-11-01T00:00:00Z'), end: at('2026-12-01T00:00:00Z') });
    expect(periodBounds('2026-12').end).toEqual(at('2027-01-01T00:00:00Z'));
    expect(periodOf(at('2026-11-30T23:59:59.999Z'))).toBe('2026-11');
    expect(previousPeriod(at('2027-01-01T00:00:30Z'))).toBe('2026-12');
    expect(nextPeriod('2026-12')).toBe('2027-01');
    expect(() => periodBounds('2026-13')).toThrow(/YYYY-MM/);
  });
});

describe('the plan billed for a period', () => {
  const schedule = [
    { fromPeriod: '2026-03', planId: 'starter' },
    { fromPeriod: '2026-12', planId: 'pro' }, // changed during November
  ];
  it('is the schedule entry in force: a change takes effect the cycle after it was made', () => {
    expect(planForPeriod(schedule, '2026-02')).toBeNull();
    expect(planForPeriod(schedule, '2026-03')).toBe('starter');
    expect(planForPeriod(schedule, '2026-11')).toBe('starter');
    expect(planForPeriod(schedule, '2026-12')).toBe('pro');
    expect(planForPeriod(schedule, '2027-06')).toBe('pro');
  });
});

describe('database cents from the size ledger', () => {
  it('applies each rate until the next snapshot or the period end, and ignores what lies outside', () => {
    const charges = databaseCharges(
      [
        { databaseId: 'db', centsPerHour: '2.083333', effectiveFrom: at('2026-10-20T00:00:00Z') }, // opening rate
        { databaseId: 'db', centsPerHour: '4.166667', effectiveFrom: at('2026-11-16T12:00:00Z') }, // resize after 372 h
        { databaseId: 'db', centsPerHour: '100', effectiveFrom: at('2026-12-01T00:00:00Z') }, // next period's
      ],
      '2026-11',
    );
    // 2.083333 × 372 + 4.166667 × 348 = 774.999876 + 1450.000116 = 2224.999992 → 2225
    expect(charges).toEqual([{ databaseId: 'db', billedMs: 720 * 3_600_000, cents: 2225 }]);
  });

  it('rounds once per database line, half up, never per segment', () => {
    const blips = [
      { databaseId: 'db', centsPerHour: '1.2', effectiveFrom: at('2026-11-03T10:00:00Z') },
      { databaseId: 'db', centsPerHour: '0', effectiveFrom: at('2026-11-03T10:15:00Z') },
      { databaseId: 'db', centsPerHour: '1.2', effectiveFrom: at('2026-11-20T08:00:00Z') },
      { databaseId: 'db', centsPerHour: '0', effectiveFrom: at('2026-11-20T08:15:00Z') },
    ];
    // 0.3 + 0.3 = 0.6 → 1 (rounding each 15-minute segment would give 0)
    expect(databaseCharges(blips, '2026-11')[0]!.cents).toBe(1);
    // exactly half a cent rounds up: 2 c/h for 15 minutes = 0.5
    const half = [
      { databaseId: 'h', centsPerHour: '2', effectiveFrom: at('2026-11-01T00:00:00Z') },
      { databaseId: 'h', centsPerHour: '0', effectiveFrom: at('2026-11-01T00:15:00Z') },
    ];
    expect(databaseCharges(half, '2026-11')[0]!.cents).toBe(1);
    // just under half rounds down: 1.999999 c/h for 15 minutes = 0.49999975
    expect(databaseCharges([{ ...half[0]!, centsPerHour: '1.999999' }, half[1]!], '2026-11')[0]!.cents).toBe(0);
  });

  it('starts a database created mid-period at its first snapshot', () => {
    const [charge] = databaseCharges([{ databaseId: 'n', centsPerHour: '3', effectiveFrom: at('2026-11-30T00:00:00Z') }], '2026-11');
    expect(charge).toEqual({ databaseId: 'n', billedMs: 24 * 3_600_000, cents: 72 });
  });

  it('reads rates exactly and refuses more than 6 decimal places', () => {
    expect(rateMicros('2.083333')).toBe(2_083_333n);
    expect(rateMicros('7')).toBe(7_000_000n);
    expect(() => rateMicros('0.0000001')).toThrow(/6 decimal places/);
    expect(() => rateMicros('-1')).toThrow();
  });

  it('equals the exact rational sum rounded half up, for any ledger (property)', () => {
    const { start } = periodBounds('2026-11');
    const monthMs = 30 * 24 * 3_600_000;
    fc.assert(
      fc.property(
        fc.array(fc.record({ offsetMs: fc.integer({ min: -monthMs, max: monthMs + 3_600_000 }), micros: fc.integer({ min: 0, max: 50_000_000 }) }), { minLength: 1, maxLength: 12 }),
        (raw) => {
          const snapshots = raw.map((r, i) => ({
            databaseId: 'p',
            centsPerHour: (r.micros / 1e6).toFixed(6),
            effectiveFrom: new Date(start.getTime() + r.offsetMs + i), // distinct times
          }));
          const ordered = [...snapshots].sort((a, b) => a.effectiveFrom.getTime() - b.effectiveFrom.getTime());
          let exact = 0n;
          ordered.forEach((s, i) => {
            const from = Math.max(s.effectiveFrom.getTime(), start.getTime());
            const until = Math.min(ordered[i + 1]?.effectiveFrom.getTime() ?? Infinity, start.getTime() + monthMs);
            if (until > from) exact += rateMicros(s.centsPerHour) * BigInt(until - from);
          });
          const denominator = 1_000_000n * 3_600_000n;
          const expected = Number((exact * 2n + denominator) / (2n * denominator));
          const charge = databaseCharges(snapshots, '2026-11')[0];
          expect(charge?.cents ?? 0).toBe(charge ? expected : 0);
        },
      ),
    );
  });
});

describe('an invoice', () => {
  it('charges the plan in full and applies the credit to usage only', () => {
    const invoice = computeInvoice({
      period: '2026-11',
      plan: starter,
      snapshots: [],
      usage: [
        { metric: 'bandwidth_gb', quantity: '10', cents: 80 },
        { metric: 'build_minutes', quantity: '100', cents: 50 },
      ],
    });
    expect(invoice.lines.map((l) => [l.key, l.amountCents])).toEqual([
      ['plan', 2000],
      ['usage:bandwidth_gb', 80],
      ['usage:build_minutes', 50],
      ['credit', -130], // credit 500 > usage 130: usage goes to zero, never below
    ]);
    expect(invoice).toMatchObject({ planCents: 2000, usageCents: 130, creditAppliedCents: 130, totalCents: 2000 });
  });

  it('leaves out zero lines: no usage means the plan alone, and no credit line', () => {
    const invoice = computeInvoice({ period: '2026-11', plan: starter, snapshots: [], usage: [{ metric: 'egress', quantity: '0', cents: 0 }] });
    expect(invoice.lines.map((l) => l.key)).toEqual(['plan']);
    expect(invoice.totalCents).toBe(2000);
  });

  it('has no lines at all on a free plan without usage', () => {
    const free: Plan = { id: 'hobby', name: 'Hobby', monthlyPriceCents: 0, includedCreditCents: 0 };
    expect(computeInvoice({ period: '2026-11', plan: free, snapshots: [], usage: [] })).toMatchObject({ lines: [], totalCents: 0 });
  });
});
