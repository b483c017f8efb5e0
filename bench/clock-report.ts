import type { E2eBurnDownResult } from './e2e-burn-down.ts';
import type { IdleResult } from './clock-idle.ts';
import type { MultiStepResult } from './clock-multistep.ts';
import type { PushResult } from './clock-push.ts';
import type { SqlInsertResult } from './clock-sql-insert.ts';
import { median } from './stats.ts';

/** Everything one tree measured (a figure that failed is absent, its reason in failures). */
export interface TreeFigures {
  label: 'current' | 'base';
  commit: string;
  multiStep?: MultiStepResult;
  sqlInsert?: SqlInsertResult;
  push?: PushResult;
  burnDown: E2eBurnDownResult[];
  idle?: IdleResult;
  failures: string[];
}

export interface ClockRow {
  figure: string;
  current: number | null;
  base: number | null;
  /** current / base: below 1 is better for times and costs, above 1 for jobs/s. */
  ratio: number | null;
  /** Why a value is missing where it is expected to be (e.g. a tree without dispatchers). */
  note?: string;
}

type Figure = (t: TreeFigures) => number | null | undefined;

const FIGURES: Array<[string, Figure]> = [
  ['multi-step job: created → finished, s', (t) => t.multiStep?.totalSeconds],
  ['multi-step job: ÷ its delays', (t) => t.multiStep?.ratioToDelays],
  ['multi-step job: longest gap between claims, s', (t) => t.multiStep?.longestGapSeconds],
  ['SQL insert → start: worst, s', (t) => t.sqlInsert?.worstSeconds],
  ['SQL insert → start: median, s', (t) => t.sqlInsert?.medianSeconds],
  ['pushed build: first step − runAt, p50 s', (t) => t.push?.p50Seconds],
  ['pushed build: first step − runAt, p99 s', (t) => t.push?.p99Seconds],
  ['burn-down through the Worker: jobs/s (median)', (t) => (t.burnDown.length ? median(t.burnDown.map((r) => r.jobsPerSec)) : null)],
  ['burn-down: workerd + wrangler CPU ms / 1k jobs', (t) => (t.burnDown.length ? median(t.burnDown.map((r) => r.cpu.workerdMs + r.cpu.wranglerMs)) : null)],
  ['idle: database transactions / h', (t) => t.idle?.transactionsPerHour],
  ['idle: database sessions / h', (t) => t.idle?.sessionsPerHour],
  ['idle: workerd CPU ms / h', (t) => t.idle?.workerdCpuMsPerHour],
  ['idle: wrangler CPU ms / h', (t) => t.idle?.wranglerCpuMsPerHour],
  ['idle: alarm invocations / h', (t) => t.idle?.alarmsPerHour],
  ['idle: dispatcher idle polls / h', (t) => t.idle?.idlePollsPerHour],
];

export function clockRows(current: TreeFigures, base: TreeFigures | null): ClockRow[] {
  return FIGURES.map(([figure, pick]) => {
    const c = pick(current) ?? null;
    const b = base ? (pick(base) ?? null) : null;
    const row: ClockRow = { figure, current: c, base: b, ratio: c !== null && b !== null && b !== 0 ? c / b : null };
    if (figure.startsWith('idle: alarm') || figure.startsWith('idle: dispatcher')) {
      const none = [current, base].filter((t): t is TreeFigures => t !== null && t.idle !== undefined && t.idle.alarmsPerHour === null);
      if (none.length) row.note = `n/a for ${none.map((t) => t.label).join(' and ')}: no dispatchers (GET /v1/dispatchers is 404)`;
    }
    return row;
  });
}

const fmt = (n: number | null) => {
  if (n === null || Number.isNaN(n)) return '—';
  const digits = Math.abs(n) >= 100 ? 0 : Math.abs(n) >= 10 ? 1 : 2;
  return n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
};

export function clockTable(rows: ClockRow[], labels: { current: string; base: string | null }): string {
  const header = ['figure', `current ${labels.current}`, ...(labels.base ? [`base ${labels.base}`, 'current / base'] : [])];
  const cells = rows.map((r) => [
    r.figure,
    fmt(r.current),
    ...(labels.base ? [fmt(r.base), r.ratio === null ? '—' : `${r.ratio.toFixed(2)}×`] : []),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const line = (c: string[]) => c.map((v, i) => (i === 0 ? v.padEnd(widths[i]!) : v.padStart(widths[i]!))).join('  ');
  const notes = rows.filter((r) => r.note).map((r) => `  ${r.figure}: ${r.note}`);
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...cells.map(line), ...notes].join('\n');
}
