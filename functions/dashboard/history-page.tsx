import type { FC } from 'hono/jsx';
import type { TypeSeries } from '../../queue/index.ts';
import { LineChart, PALETTE, type Line } from './charts.tsx';
import { Layout } from './layout.tsx';
import { TopBar, type Lease } from './pages.tsx';

/** The windows the history page offers, each with the bin its points are summed into. */
export const HISTORY_WINDOWS = {
  '1h': { ms: 3_600_000, binMinutes: 1 },
  '6h': { ms: 6 * 3_600_000, binMinutes: 5 },
  '24h': { ms: 24 * 3_600_000, binMinutes: 15 },
  '7d': { ms: 7 * 86_400_000, binMinutes: 60 },
} as const;
export type HistoryWindow = keyof typeof HISTORY_WINDOWS;
/** Lines per chart: the busiest types; the rest are in the table. */
export const TYPES_CHARTED = 8;

export interface HistoryPageData {
  now: Date;
  csrf: string;
  lease: Lease;
  window: HistoryWindow;
  series: TypeSeries[];
}

const seconds = (v: number) => (!Number.isFinite(v) ? '∞' : v >= 10 ? `${Math.round(v)}s` : v >= 1 ? `${v.toFixed(1)}s` : `${Math.round(v * 1000)}ms`);
const percent = (v: number) => `${Math.round(v * 1000) / 10}%`;
const perMinute = (v: number) => `${Math.round(v * 10) / 10}/min`;

function lines(series: TypeSeries[], value: (p: TypeSeries['points'][number]) => number): Line[] {
  return series.slice(0, TYPES_CHARTED).map((s, i) => ({ label: s.type, colour: PALETTE[i % PALETTE.length]!, points: s.points.map((p) => ({ at: p.at, value: value(p) })) }));
}

/**
 * Throughput, failure rate and step latency per job type over time, from worker.step_minutes
 * (the tick's roll-up writes it; 0230). A bin with no steps draws no point.
 */
export const HistoryPage: FC<HistoryPageData> = (d) => {
  const { ms, binMinutes } = HISTORY_WINDOWS[d.window];
  const charted = d.series.slice(0, TYPES_CHARTED);
  return (
    <Layout title="Job types over time" refreshSeconds={60} header={<TopBar csrf={d.csrf} lease={d.lease} now={d.now} />}>
      <h1>Job types over time</h1>
      <p class="actions" id="windows">
        {(Object.keys(HISTORY_WINDOWS) as HistoryWindow[]).map((w) => (w === d.window ? <strong>last {w}</strong> : <a href={`/dashboard/history?window=${w}`}>last {w}</a>))}
        <span class="muted">points of {binMinutes} min; the newest minute appears once the roll-up (1 min behind) has it</span>
      </p>
      {d.series.length === 0 ? (
        <p class="muted" id="no-history">No steps ended in the last {d.window}.</p>
      ) : (
        <>
          <section class="panel"><h2>Jobs done per minute</h2>
            <LineChart id="throughput" windowMs={ms} now={d.now} label={`jobs done per minute by type, last ${d.window}`} format={perMinute} lines={lines(charted, (p) => p.done / binMinutes)} />
          </section>
          <section class="panel"><h2>Failure rate (steps retried, failed or lost, of all steps)</h2>
            <LineChart id="failure-rate" windowMs={ms} now={d.now} label={`failure rate by type, last ${d.window}`} format={percent} lines={lines(charted, (p) => p.failureRate)} />
          </section>
          <section class="panel"><h2>Step latency, p95</h2>
            <LineChart id="latency" windowMs={ms} now={d.now} label={`p95 step duration by type, last ${d.window}`} format={seconds} lines={lines(charted, (p) => Math.min(p.p95Seconds, 600))} />
          </section>
          <section class="panel"><h2>By type, last {d.window}</h2>
            <table id="type-totals">
              <thead><tr><th>type</th><th>steps</th><th>jobs done</th><th>failed steps</th><th>failure rate</th><th>mean step</th></tr></thead>
              <tbody>
                {d.series.map((s) => {
                  const done = s.points.reduce((n, p) => n + p.done, 0);
                  const failures = s.points.reduce((n, p) => n + p.failures, 0);
                  const secs = s.points.reduce((n, p) => n + p.meanSeconds * p.steps, 0);
                  return (
                    <tr data-type={s.type}>
                      <td>{s.type}</td><td data-steps="">{s.steps}</td><td data-done="">{done}</td><td data-failures="">{failures}</td>
                      <td data-failure-rate="">{percent(s.steps ? failures / s.steps : 0)}</td><td>{seconds(s.steps ? secs / s.steps : 0)}</td>
                    </tr>
                  );
                })}
              </tbody>
            </table>
          </section>
        </>
      )}
    </Layout>
  );
};
