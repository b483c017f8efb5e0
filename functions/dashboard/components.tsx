import type { FC } from 'hono/jsx';
import { LineChart } from './charts.tsx';
import type { DepthPoint } from './queries.ts';

/** Small pieces shared by the dashboard's pages. */

export const STATUS_COLOURS: Record<string, string> = {
  queued: '#2563eb',
  running: '#d97706',
  done: '#16a34a',
  failed: '#dc2626',
  cancelled: '#6b7280',
  oom_killed: '#7c3aed',
};

export const StatusBadge: FC<{ status: string }> = ({ status }) => (
  <span class={`status status-${status}`} data-status={status}>
    {status}
  </span>
);

/** 42s, 17m, 3h05m, 2d4h: an age at a glance. */
/**
 * A job id short enough for a table cell. A UUIDv7 starts with its creation time, so its first
 * characters are the same for every job made around the same moment; its last 8 hex digits are
 * random (rand_b), so they tell jobs apart. The full id is the link target and the tooltip.
 */
export function shortId(id: string): string {
  return id.replace(/-/g, '').slice(-8);
}

export const JobLink: FC<{ id: string }> = ({ id }) => (
  <a href={`/dashboard/jobs/${id}`} title={id} data-short-id={shortId(id)}>…{shortId(id)}</a>
);

export function age(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.floor(s / 60)}m`;
  if (s < 172_800) return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
  return `${Math.floor(s / 86_400)}d${Math.floor((s % 86_400) / 3600)}h`;
}

/** UTC, to the second: `2026-11-30 22:45:01Z`. */
export function time(d: Date | null | undefined): string {
  if (!d) return '–';
  if (d.getTime() >= 8.64e15) return 'never (parked)';
  return d.toISOString().replace('T', ' ').replace(/\.\d{3}Z$/, 'Z');
}

export const Time: FC<{ at: Date | null | undefined; now?: Date }> = ({ at, now }) =>
  at ? (
    <time datetime={at.toISOString()} title={time(at)}>
      {now ? (at.getTime() <= now.getTime() ? `${age(now.getTime() - at.getTime())} ago` : `in ${age(at.getTime() - now.getTime())}`) : time(at)}
    </time>
  ) : (
    <span class="muted">–</span>
  );

/** Pretty JSON, with the env's secret values scrubbed: redaction by key name misses a secret under an innocent key. */
export const Json: FC<{ value: unknown; scrub: (text: string) => string }> = ({ value, scrub }) =>
  value === null || value === undefined ? <span class="muted">none</span> : <pre class="json">{scrub(JSON.stringify(value, null, 2))}</pre>;

const SERIES = [
  { key: 'queued', label: 'queued', colour: STATUS_COLOURS.queued! },
  { key: 'due', label: 'due (waiting)', colour: '#0891b2' },
  { key: 'running', label: 'running', colour: STATUS_COLOURS.running! },
] as const;

/** Queue depth over time: one line per series, from the tick's snapshots. */
export const DepthChart: FC<{ points: DepthPoint[]; windowMs: number; now: Date }> = ({ points, windowMs, now }) => {
  if (points.length === 0) {
    return <p class="muted">No snapshots yet: the leader's tick records the queue depth once a minute.</p>;
  }
  const last = points[points.length - 1]!;
  return (
    <LineChart
      windowMs={windowMs}
      now={now}
      label={`queue depth: ${last.queued} queued, ${last.due} due, ${last.running} running`}
      lines={SERIES.map((s) => ({ label: s.label, colour: s.colour, points: points.map((p) => ({ at: p.at, value: p[s.key] })) }))}
    />
  );
};
