import { describe, expect, it } from 'vitest';
import { histogramSamples, parseExposition, renderMetrics, type MetricFamily } from '../../functions/lib/prometheus.ts';

/** functions/lib/prometheus.ts: the exposition writer and its strict reader. */
describe('renderMetrics', () => {
  it('writes HELP, TYPE and samples, escaping label values and help text', () => {
    const text = renderMetrics([
      { name: 'x_jobs', help: 'Jobs\\by "type"\nsecond line', type: 'gauge', samples: [{ labels: { type: 'a"b\\c\nd' }, value: 3 }, { value: NaN }] },
      { name: 'x_errors_total', help: 'Errors.', type: 'counter', samples: [{ value: 0 }] },
      { name: 'x_empty', help: 'No samples yet.', type: 'gauge', samples: [] },
    ]);
    expect(text).toBe(
      [
        '# HELP x_jobs Jobs\\\\by "type"\\nsecond line',
        '# TYPE x_jobs gauge',
        'x_jobs{type="a\\"b\\\\c\\nd"} 3',
        'x_jobs NaN',
        '# HELP x_errors_total Errors.',
        '# TYPE x_errors_total counter',
        'x_errors_total 0',
        '# HELP x_empty No samples yet.',
        '# TYPE x_empty gauge',
        '',
      ].join('\n'),
    );
    const parsed = parseExposition(text);
    expect(parsed[0]).toMatchObject({ name: 'x_jobs', help: 'Jobs\\by "type"\nsecond line', type: 'gauge' });
    expect(parsed[0]!.samples[0]).toEqual({ name: 'x_jobs', labels: { type: 'a"b\\c\nd' }, value: 3 });
    expect(Number.isNaN(parsed[0]!.samples[1]!.value)).toBe(true);
    expect(parsed[2]).toMatchObject({ name: 'x_empty', samples: [] });
  });

  it('refuses invalid names, a counter without _total, a family twice, a suffix outside a histogram', () => {
    const f = (over: Partial<MetricFamily>): MetricFamily => ({ name: 'ok', help: 'h', type: 'gauge', samples: [], ...over });
    expect(() => renderMetrics([f({ name: '1bad' })])).toThrow(/invalid metric name/);
    expect(() => renderMetrics([f({ samples: [{ labels: { 'bad-label': 'x' }, value: 1 }] })])).toThrow(/invalid label name/);
    expect(() => renderMetrics([f({ samples: [{ labels: { __reserved: 'x' }, value: 1 }] })])).toThrow(/invalid label name/);
    expect(() => renderMetrics([f({ name: 'hits', type: 'counter' })])).toThrow(/must end in _total/);
    expect(() => renderMetrics([f({}), f({})])).toThrow(/twice/);
    expect(() => renderMetrics([f({ samples: [{ suffix: '_sum', value: 1 }] })])).toThrow(/suffix/);
  });

  it('renders a histogram with cumulative buckets, +Inf, _sum and _count', () => {
    const samples = histogramSamples({ type: 'build' }, [0.1, 1, 10], [2, 0, 3, 1], 42.5);
    const text = renderMetrics([{ name: 'x_seconds', help: 'Durations.', type: 'histogram', samples }]);
    expect(text).toContain('x_seconds_bucket{type="build",le="0.1"} 2\nx_seconds_bucket{type="build",le="1"} 2\nx_seconds_bucket{type="build",le="10"} 5\nx_seconds_bucket{type="build",le="+Inf"} 6\nx_seconds_sum{type="build"} 42.5\nx_seconds_count{type="build"} 6\n');
    expect(parseExposition(text)[0]!.samples).toHaveLength(6);
    expect(() => histogramSamples({}, [1, 2], [1, 2], 0)).toThrow(/needs 3 counts/);
  });
});

describe('parseExposition', () => {
  const family = '# HELP m help\n# TYPE m gauge\n';
  it('accepts the format as written by other exporters: empty label sets, trailing commas, timestamps, exponents, Inf', () => {
    const parsed = parseExposition(`${family}m{} 1\nm{a="x",} 1e-3 1700000000000\nm{a="y"} -Inf\nm{a="z"} +Inf\n`);
    expect(parsed[0]!.samples.map((s) => s.value)).toEqual([1, 0.001, -Infinity, Infinity]);
  });

  it.each([
    ['no trailing newline', `${family}m 1`, /end with a newline/],
    ['a sample before any TYPE', 'm 1\n', /does not belong/],
    ['a sample of another family', `${family}other 1\n`, /does not belong/],
    ['a bad value', `${family}m one\n`, /not a float/],
    ['unquoted label value', `${family}m{a=x} 1\n`, /not a valid sample line/],
    ['an unescaped quote', `${family}m{a="x"y"} 1\n`, /not a valid sample line/],
    ['two spaces', `${family}m  1\n`, /not a valid sample line/],
    ['a duplicate series', `${family}m{a="x"} 1\nm{a="x"} 2\n`, /appears twice/],
    ['a duplicate label', `${family}m{a="x",a="y"} 1\n`, /label a twice/],
    ['a second TYPE', `${family}m 1\n# TYPE m gauge\n`, /second TYPE/],
    ['a stray comment', `${family}# hello\n`, /neither HELP nor TYPE/],
    ['an unknown type', '# TYPE m thing\n', /neither HELP nor TYPE/],
    ['a negative counter', '# TYPE c_total counter\nc_total -1\n', /counter c_total is -1/],
    ['an empty line in the middle', `${family}\nm 1\n`, /not a valid sample line/],
  ])('rejects %s', (_, text, error) => {
    expect(() => parseExposition(text)).toThrow(error);
  });

  it.each([
    ['no +Inf bucket', 'h_bucket{le="1"} 1\nh_sum 1\nh_count 1\n', /no \+Inf bucket/],
    ['buckets that shrink', 'h_bucket{le="1"} 2\nh_bucket{le="+Inf"} 1\nh_sum 1\nh_count 1\n', /not cumulative/],
    ['le out of order', 'h_bucket{le="2"} 1\nh_bucket{le="1"} 1\nh_bucket{le="+Inf"} 1\nh_sum 1\nh_count 1\n', /not ascending/],
    ['+Inf differing from _count', 'h_bucket{le="+Inf"} 2\nh_sum 1\nh_count 1\n', /differs from _count/],
    ['no _count', 'h_bucket{le="+Inf"} 1\nh_sum 1\n', /missing/],
  ])('rejects a histogram with %s', (_, body, error) => {
    expect(() => parseExposition(`# TYPE h histogram\n${body}`)).toThrow(error);
  });
});
