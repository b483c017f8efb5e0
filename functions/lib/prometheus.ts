/**
 * Prometheus text exposition (format 0.0.4), small enough to run anywhere (workerd included):
 * prom-client needs Node internals and keeps its registry in process memory, while our numbers
 * come from Postgres on every scrape. `renderMetrics` writes the format; `parseExposition` reads
 * it back strictly (tests validate /metrics with it).
 */
export type Labels = Record<string, string>;

export type MetricType = 'gauge' | 'counter' | 'histogram';

export interface Sample {
  labels?: Labels;
  value: number;
  /** `_bucket`, `_sum` or `_count` for a histogram's series; `_total` is part of a counter's name. */
  suffix?: '_bucket' | '_sum' | '_count';
}

export interface MetricFamily {
  name: string;
  help: string;
  type: MetricType;
  samples: Sample[];
}

export const CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

const escapeLabel = (v: string) => v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
const escapeHelp = (v: string) => v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');

export function formatValue(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  return String(v);
}

function formatLabels(labels: Labels): string {
  const entries = Object.entries(labels);
  if (entries.length === 0) return '';
  for (const [k] of entries) if (!LABEL_NAME.test(k) || k.startsWith('__')) throw new Error(`invalid label name ${k}`);
  return `{${entries.map(([k, v]) => `${k}="${escapeLabel(v)}"`).join(',')}}`;
}

/** Every family gets its HELP and TYPE lines, even without samples, so scrapers see it exists. */
export function renderMetrics(families: MetricFamily[]): string {
  const lines: string[] = [];
  const seen = new Set<string>();
  for (const f of families) {
    if (!METRIC_NAME.test(f.name)) throw new Error(`invalid metric name ${f.name}`);
    if (seen.has(f.name)) throw new Error(`metric ${f.name} is rendered twice`);
    seen.add(f.name);
    if (f.type === 'counter' && !f.name.endsWith('_total')) throw new Error(`counter ${f.name} must end in _total`);
    lines.push(`# HELP ${f.name} ${escapeHelp(f.help)}`, `# TYPE ${f.name} ${f.type}`);
    for (const s of f.samples) {
      if (s.suffix && f.type !== 'histogram') throw new Error(`${f.name}: only a histogram's samples take a suffix`);
      lines.push(`${f.name}${s.suffix ?? ''}${formatLabels(s.labels ?? {})} ${formatValue(s.value)}`);
    }
  }
  return lines.join('\n') + '\n';
}

/**
 * A histogram's series for one label set: cumulative `_bucket`s (one per bound, then +Inf),
 * `_sum` and `_count`. `counts[i]` is the number of observations in bucket i alone: at most
 * `bounds[i]` and above `bounds[i-1]`; `counts[bounds.length]` is the overflow.
 */
export function histogramSamples(labels: Labels, bounds: readonly number[], counts: readonly number[], sum: number): Sample[] {
  if (counts.length !== bounds.length + 1) throw new Error(`a histogram over ${bounds.length} bounds needs ${bounds.length + 1} counts`);
  const samples: Sample[] = [];
  let cumulative = 0;
  bounds.forEach((bound, i) => {
    cumulative += counts[i]!;
    samples.push({ suffix: '_bucket', labels: { ...labels, le: formatValue(bound) }, value: cumulative });
  });
  cumulative += counts[bounds.length]!;
  samples.push({ suffix: '_bucket', labels: { ...labels, le: '+Inf' }, value: cumulative });
  samples.push({ suffix: '_sum', labels, value: sum });
  samples.push({ suffix: '_count', labels, value: cumulative });
  return samples;
}

export interface ParsedSample {
  name: string;
  labels: Labels;
  value: number;
}

export interface ParsedFamily {
  name: string;
  type: MetricType | 'summary' | 'untyped';
  help: string;
  samples: ParsedSample[];
}

const HELP_LINE = /^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) ((?:[^\\\n]|\\\\|\\n)*)$/;
const TYPE_LINE = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$/;
const SAMPLE_LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\\\|\\"|\\n)*"(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\\\|\\"|\\n)*")*,?)?\})? ([^ ]+)(?: (-?\d+))?$/;
const LABEL_PAIR = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\\\|\\"|\\n)*)"/g;
const FLOAT = /^(?:[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[+-]?Inf|NaN)$/;

const unescapeLabel = (v: string) => v.replace(/\\(\\|"|n)/g, (_, c: string) => (c === 'n' ? '\n' : c));

function parseFloatStrict(text: string, where: string): number {
  if (!FLOAT.test(text)) throw new Error(`${where}: "${text}" is not a float`);
  if (/Inf$/.test(text)) return text.startsWith('-') ? -Infinity : Infinity;
  return Number(text);
}

/**
 * A strict reader of the text format: every line must be a HELP, a TYPE, a sample of the family
 * declared just before it, or empty at the very end. Checks what a scraper relies on beyond the
 * grammar: one TYPE per family, before its samples; no series twice; counters not negative;
 * histogram buckets with ascending `le`, cumulative, ending in +Inf equal to `_count`.
 */
export function parseExposition(text: string): ParsedFamily[] {
  if (!text.endsWith('\n')) throw new Error('the exposition must end with a newline');
  const lines = text.slice(0, -1).split('\n');
  const families = new Map<string, ParsedFamily>();
  const series = new Set<string>();
  let current: ParsedFamily | null = null;
  lines.forEach((line, i) => {
    const where = `line ${i + 1}`;
    let m: RegExpExecArray | null;
    if ((m = HELP_LINE.exec(line))) {
      const family = families.get(m[1]!) ?? { name: m[1]!, type: 'untyped' as const, help: '', samples: [] };
      if (family.samples.length) throw new Error(`${where}: HELP for ${m[1]} after its samples`);
      family.help = m[2]!.replace(/\\(\\|n)/g, (_, c: string) => (c === 'n' ? '\n' : c));
      families.set(family.name, family);
      current = family;
      return;
    }
    if ((m = TYPE_LINE.exec(line))) {
      const existing = families.get(m[1]!);
      if (existing && (existing.type !== 'untyped' || existing.samples.length)) throw new Error(`${where}: second TYPE for ${m[1]}`);
      const family = existing ?? { name: m[1]!, type: 'untyped' as const, help: '', samples: [] };
      family.type = m[2] as ParsedFamily['type'];
      families.set(family.name, family);
      current = family;
      return;
    }
    if (line.startsWith('#')) throw new Error(`${where}: a comment that is neither HELP nor TYPE: ${line}`);
    if (!(m = SAMPLE_LINE.exec(line))) throw new Error(`${where}: not a valid sample line: ${JSON.stringify(line)}`);
    const name = m[1]!;
    const family = current as ParsedFamily | null;
    const suffixes = family?.type === 'histogram' ? ['_bucket', '_sum', '_count'] : family?.type === 'summary' ? ['', '_sum', '_count'] : [''];
    if (!family || !suffixes.some((s) => `${family.name}${s}` === name)) {
      throw new Error(`${where}: sample ${name} does not belong to the family declared before it (${family?.name ?? 'none'})`);
    }
    const labels: Labels = {};
    for (const pair of (m[2] ?? '').matchAll(LABEL_PAIR)) {
      if (pair[1]! in labels) throw new Error(`${where}: label ${pair[1]} twice`);
      labels[pair[1]!] = unescapeLabel(pair[2]!);
    }
    const value = parseFloatStrict(m[3]!, where);
    if (family.type === 'counter' && !(value >= 0)) throw new Error(`${where}: counter ${name} is ${value}`);
    const key = `${name}${JSON.stringify(Object.entries(labels).sort())}`;
    if (series.has(key)) throw new Error(`${where}: series ${name}${m[2] ?? ''} appears twice`);
    series.add(key);
    family.samples.push({ name, labels, value });
  });
  for (const f of families.values()) if (f.type === 'histogram') checkHistogram(f);
  return [...families.values()];
}

function checkHistogram(f: ParsedFamily): void {
  const groups = new Map<string, { buckets: Array<[number, number]>; count?: number; sum?: number }>();
  for (const s of f.samples) {
    const { le, ...rest } = s.labels;
    const key = JSON.stringify(Object.entries(rest).sort());
    const g = groups.get(key) ?? { buckets: [] };
    groups.set(key, g);
    if (s.name.endsWith('_bucket')) {
      if (le === undefined) throw new Error(`${f.name}: a bucket without le`);
      g.buckets.push([parseFloatStrict(le, `${f.name} le`), s.value]);
    } else if (s.name.endsWith('_count')) g.count = s.value;
    else g.sum = s.value;
  }
  for (const [key, g] of groups) {
    if (g.count === undefined || g.sum === undefined) throw new Error(`${f.name}${key}: _sum or _count missing`);
    for (let i = 1; i < g.buckets.length; i++) {
      if (!(g.buckets[i]![0] > g.buckets[i - 1]![0])) throw new Error(`${f.name}${key}: le not ascending`);
      if (g.buckets[i]![1] < g.buckets[i - 1]![1]) throw new Error(`${f.name}${key}: buckets not cumulative`);
    }
    const last = g.buckets.at(-1);
    if (!last || last[0] !== Infinity) throw new Error(`${f.name}${key}: no +Inf bucket`);
    if (last[1] !== g.count) throw new Error(`${f.name}${key}: +Inf bucket ${last[1]} differs from _count ${g.count}`);
  }
}
