import fc from 'fast-check';

/**
 * Hostile input for property tests, shared by the Node (SQL) and workerd (HTTP) suites: SQL
 * fragments, control characters and NUL, lone surrogates, every Unicode plane, strings just
 * under and over the API's length limits, huge strings, deep nesting, and values of every type.
 * Plain TypeScript without Node imports, so it also runs inside workerd.
 */

export const SQL_FRAGMENTS = [
  "'", "''", '"', '\\', ';', '--', '/*', '*/', '$$', '$1', '%s', '?', ':name', '::jsonb', 'NULL', 'null',
  "' or '1'='1", "'; drop table worker.jobs; --", "'); delete from worker.job_events; --", '" or 1=1 --',
  "1; select pg_sleep(30); --", "' union select lease_token::text from worker.jobs --", "E'\\x00'",
  '$tag$ drop schema worker cascade $tag$', "'||(select current_user)||'", '\\x27', '%27%20or%201%3D1',
];

/** Lengths around the API's limits (63 type, 100 pool, 200 keys, 1000 reason) and far past them. */
const EDGE_LENGTHS = [0, 1, 62, 63, 64, 99, 100, 101, 199, 200, 201, 999, 1000, 1001, 5000, 70_000];

export const sqlFragment = fc.constantFrom(...SQL_FRAGMENTS);

export const hostileString: fc.Arbitrary<string> = fc.oneof(
  fc.string({ maxLength: 30 }),
  fc.string({ unit: 'binary', maxLength: 30 }), // any code point, NUL and controls included
  fc.string({ unit: 'grapheme', maxLength: 12 }),
  sqlFragment,
  fc.tuple(fc.string({ maxLength: 8 }), sqlFragment, fc.string({ maxLength: 8 })).map(([a, b, c]) => a + b + c),
  fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => `a${String.fromCharCode(c)}b`), // a lone surrogate
  fc.constantFrom('\u0000', 'a\u0000b', '\u202e', '\ufeff', '\u0085', '𝕏'.repeat(40), '\r\n', '\t'),
  fc.constantFrom(...EDGE_LENGTHS).map((n) => 'k'.repeat(n)),
);

/** Nested arrays/objects `depth` levels deep, built without recursion. */
export function nested(depth: number, kind: 'array' | 'object' = 'object'): unknown {
  let v: unknown = 'leaf';
  for (let i = 0; i < depth; i++) v = kind === 'array' ? [v] : { d: v };
  return v;
}

export const deepValue = fc
  .tuple(fc.constantFrom(30, 31, 32, 33, 34, 100, 1000), fc.constantFrom('array' as const, 'object' as const))
  .map(([depth, kind]) => nested(depth, kind));

/** Any value a JSON body can hold, hostile strings and depths included. */
export const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 3, arbitrary: hostileString },
  { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  { weight: 1, arbitrary: fc.constantFrom(null, true, false, 0, -0, -1, 1.5, 2 ** 31, -(2 ** 31) - 1, 2 ** 53, 1e308, -1e308, '', [], {}) },
  { weight: 1, arbitrary: fc.integer() },
  { weight: 1, arbitrary: deepValue },
  { weight: 1, arbitrary: fc.dictionary(hostileString, fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 }) },
);

/** Bodies that are not JSON at all, or JSON cut short. */
export const malformedJson = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.constantFrom('', ' ', '{', '}', '{"type":', '{"type": "uppercase",}', "{'type': 'uppercase'}", '[', 'nul', 'NaN', '{"a":1}{"b":2}', '\u0000', '{"type":"uppercase","payload":{"text":"\\ud800"}}'),
  fc.jsonValue().map((v) => JSON.stringify(v).slice(0, -1) || '{'),
);

/** Timestamps, valid and not. */
export const hostileTimestamp = fc.oneof(
  hostileString,
  fc.date({ noInvalidDate: false }).map((d) => (Number.isNaN(d.getTime()) ? 'Invalid Date' : d.toISOString())),
  fc.constantFrom('2026-13-01T00:00:00Z', '2026-02-30T00:00:00Z', '0000-01-01T00:00:00Z', '+275760-09-13T00:00:00.000Z', '-271821-04-20T00:00:00.000Z', 'infinity', '-infinity', 'epoch', 'now', 'today', '2026-11-30T12:00:00+25:00', '2026-11-30'),
);
