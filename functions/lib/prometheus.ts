/**
 * Prometheus text exposition (format 0.0.4), small enough to run anywhere (workerd included).
 */
export type Labels = Record<string, string>;

export interface MetricFamily {
  name: string;
  help: string;
  type: 'gauge' | 'counter' | 'histogram';
  samples: Array<{ labels?: Labels; value: number; suffix?: string }>;
}

const escapeLabel = (v: string) => v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
const escapeHelp = (v: string) => v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');

function formatValue(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  return String(v);
}

export function renderMetrics(families: MetricFamily[]): string {
  const lines: string[] = [];
  for (const f of families) {
    if (!/^[a-zA-Z_:][a-zA-Z0-9_:]*$/.test(f.name)) throw new Error(`invalid metric name ${f.name}`);
    lines.push(`# HELP ${f.name} ${escapeHelp(f.help)}`, `# TYPE ${f.name} ${f.type}`);
    for (const s of f.samples) {
      const labels = Object.entries(s.labels ?? {});
      const rendered = labels.length ? `{${labels.map(([k, v]) => `${k}="${escapeLabel(v)}"`).join(',')}}` : '';
      lines.push(`${f.name}${s.suffix ?? ''}${rendered} ${formatValue(s.value)}`);
    }
  }
  return lines.join('\n') + '\n';
}
