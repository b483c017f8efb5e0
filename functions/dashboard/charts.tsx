import type { FC } from 'hono/jsx';
import { time } from './components.tsx';

/** Lines over time as an inline SVG (no script): the queue depth chart and the job types' history. */

export interface Line {
  label: string;
  colour: string;
  points: { at: Date; value: number }[];
  /** The legend's reading (default: the last point's value). */
  reading?: string;
}

/** Distinct colours for up to 8 lines, then repeated. */
export const PALETTE = ['#2563eb', '#d97706', '#16a34a', '#dc2626', '#7c3aed', '#0891b2', '#db2777', '#65a30d'];

export const LineChart: FC<{ lines: Line[]; windowMs: number; now: Date; label: string; format?: (v: number) => string; id?: string }> = ({ lines, windowMs, now, label, format = String, id }) => {
  const [w, h, left, bottom, top] = [720, 180, 48, 22, 8];
  const end = now.getTime();
  const start = end - windowMs;
  const values = lines.flatMap((l) => l.points.map((p) => p.value)).filter(Number.isFinite);
  const max = Math.max(0, ...values) || 1;
  const x = (at: Date) => left + ((at.getTime() - start) / windowMs) * (w - left - 4);
  const y = (v: number) => top + (1 - Math.min(v, max) / max) * (h - top - bottom);
  return (
    <figure class="chart" id={id}>
      <svg viewBox={`0 0 ${w} ${h}`} role="img" aria-label={label}>
        <line x1={left} y1={y(0)} x2={w - 4} y2={y(0)} class="axis" />
        <line x1={left} y1={y(max)} x2={w - 4} y2={y(max)} class="grid" />
        <text x={left - 6} y={y(max) + 4} class="tick" text-anchor="end">{format(max)}</text>
        <text x={left - 6} y={y(0) + 4} class="tick" text-anchor="end">{format(0)}</text>
        <text x={left} y={h - 4} class="tick">{time(new Date(start))}</text>
        <text x={w - 4} y={h - 4} class="tick" text-anchor="end">{time(now)}</text>
        {lines.map((l) => {
          const last = l.points[l.points.length - 1];
          return (
            <>
              <polyline fill="none" stroke={l.colour} stroke-width="2" points={l.points.map((p) => `${x(p.at).toFixed(1)},${y(p.value).toFixed(1)}`).join(' ')} />
              {last ? <circle cx={x(last.at).toFixed(1)} cy={y(last.value).toFixed(1)} r="3" fill={l.colour} /> : null}
            </>
          );
        })}
      </svg>
      <figcaption>
        {lines.map((l) => (
          <span class="legend" data-line={l.label}>
            <i style={`background:${l.colour}`} /> {l.label} {l.reading ?? format(l.points[l.points.length - 1]?.value ?? 0)}
          </span>
        ))}
      </figcaption>
    </figure>
  );
};
