import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createApp } from '../../functions/app.ts';
import { zodField } from '../../functions/http/errors.ts';
import { createWorkerHarness, type WorkerHarness } from './support.ts';

/**
 * A refusal of a value from a fixed set (an enum, a literal, a union of literals) names what is
 * allowed. Every route's body and query schema is read from the app's own OpenAPI registry (the
 * schemas the handlers parse with), each such field is found by walking it, given a value outside
 * its set, and the answer's message must list every allowed value; a few routes are then called
 * end to end.
 */
type Leaf = { path: Array<string | number>; allowed: unknown[] };
type Def = { type: string; [k: string]: any };
const defOf = (schema: unknown): Def => (schema as { _zod: { def: Def } })._zod.def;

/** The values a fixed-set schema allows, or null when it is not one. */
function fixedValues(schema: unknown): unknown[] | null {
  const def = defOf(schema);
  if (def.type === 'enum') return Object.values(def.entries as Record<string, unknown>);
  if (def.type === 'literal') return [...(def.values as unknown[])];
  if (def.type === 'union') {
    const parts = (def.options as unknown[]).map(fixedValues);
    return parts.every((p) => p !== null) ? parts.flat() : null;
  }
  if (['optional', 'nullable', 'default', 'readonly', 'catch', 'nonoptional', 'prefault'].includes(def.type)) return fixedValues(def.innerType);
  return null;
}

function leaves(schema: unknown, path: Array<string | number> = []): Leaf[] {
  const allowed = fixedValues(schema);
  if (allowed) return [{ path, allowed }];
  const def = defOf(schema);
  switch (def.type) {
    case 'object': return Object.entries(def.shape as Record<string, unknown>).flatMap(([k, v]) => leaves(v, [...path, k]));
    case 'array': return leaves(def.element, [...path, 0]);
    case 'union': return (def.options as unknown[]).flatMap((o) => leaves(o, path));
    case 'record': return leaves(def.valueType, [...path, 'key']);
    case 'pipe': return leaves(def.in, path);
    case 'optional': case 'nullable': case 'default': case 'readonly': case 'catch': case 'nonoptional': case 'prefault':
      return leaves(def.innerType, path);
    default: return [];
  }
}

/** An input holding `value` at `path`, nothing else. */
function inputAt(path: Array<string | number>, value: unknown): unknown {
  if (path.length === 0) return value;
  const [head, ...rest] = path;
  return typeof head === 'number' ? [inputAt(rest, value)] : { [head!]: inputAt(rest, value) };
}

const shown = (v: unknown) => (typeof v === 'string' ? JSON.stringify(v) : String(v));

const ROUTES = createApp().openAPIRegistry.definitions.flatMap((d) => (d.type === 'route' ? [d.route] : []));
const SCHEMAS = ROUTES.flatMap((r) => {
  const body = (r.request?.body?.content?.['application/json'] as { schema?: unknown } | undefined)?.schema;
  return [
    ...(body instanceof z.ZodType ? [{ where: `${r.method.toUpperCase()} ${r.path} body`, schema: body }] : []),
    ...(r.request?.query instanceof z.ZodType ? [{ where: `${r.method.toUpperCase()} ${r.path} query`, schema: r.request.query }] : []),
  ];
});

describe('a value outside a fixed set', () => {
  it('is refused, on every route, with a message naming every allowed value', () => {
    const checked: string[] = [];
    for (const { where, schema } of SCHEMAS) {
      for (const leaf of leaves(schema)) {
        const name = leaf.path.join('.');
        const error = (schema as z.ZodType).safeParse(inputAt(leaf.path, '__not_allowed__')).error!;
        // the issue about this field, as the API words it (zodField words the first issue)
        const worded = error.issues.map((issue) => zodField(new z.ZodError([issue]))).find((w) => w.field === name);
        expect(worded, `${where}: ${name} refused`).toBeDefined();
        for (const value of leaf.allowed) expect(worded!.message, `${where}: ${name}`).toContain(shown(value));
        expect(worded!.message, `${where}: ${name}`).not.toMatch(/Invalid (input|option)/);
        checked.push(`${where}: ${name}`);
      }
    }
    // the walk found the fields the issue names, so a schema it cannot read does not pass unseen
    expect(checked).toEqual(expect.arrayContaining([
      'POST /v1/clusters body: controlPlanes', 'POST /v1/pauses body: kind', 'GET /v1/jobs query: inProgress',
      'POST /v1/jobs body: deadlineSeverity', 'POST /v1/jobs/bulk/retry body: filter.status', 'POST /v1/jobs/bulk/retry body: filter.status.0',
      'POST /v1/jobs/bulk/retry body: filter.all',
    ]));
  });
});

describe('over HTTP', () => {
  let h: WorkerHarness;
  beforeAll(async () => {
    h = await createWorkerHarness();
  });
  const refusal = async (path: string, init: { method?: string; json?: unknown; token?: 'admin' | 'enqueue' } = {}) => {
    const res = await h.request(path, { method: init.method ?? (init.json ? 'POST' : 'GET'), json: init.json, token: init.token ?? 'admin' });
    expect(res.status, path).toBe(400);
    return ((await res.json()) as { error: { code: string; field?: string; message: string } }).error;
  };

  it('controlPlanes: 1, 3 or 5; kind: type or pool; inProgress: true or false; a bulk status and a list of them', async () => {
    // every other field valid: the body is refused for controlPlanes alone, before the account is looked up
    const cluster = { accountId: '00000000-0000-4000-8000-000000000000', name: 'refused', region: 'fra1', controlPlanes: 2, workers: 1, size: 's-2vcpu-4gb' };
    expect(await refusal('/v1/clusters', { json: cluster, token: 'enqueue' })).toMatchObject({ field: 'controlPlanes', message: 'controlPlanes: must be one of 1, 3 or 5' });
    expect(await refusal('/v1/pauses', { json: { kind: 'queue', name: 'x', reason: 'r' } })).toMatchObject({ field: 'kind', message: 'kind: must be one of "type" or "pool"' });
    expect(await refusal('/v1/jobs?inProgress=yes')).toMatchObject({ field: 'inProgress', message: 'inProgress: must be one of "true" or "false"' });
    const status = await refusal('/v1/jobs/bulk/retry', { json: { filter: { status: 'gone' }, dryRun: true } });
    expect(status).toMatchObject({ field: 'filter.status', message: expect.stringMatching(/^filter\.status: must be one of "queued", .*"oom_killed", or an array$/) });
    expect(await refusal('/v1/jobs/bulk/retry', { json: { filter: { status: ['failed', 'gone'] }, dryRun: true } }))
      .toMatchObject({ field: 'filter.status.1', message: expect.stringContaining('"failed"') });
    expect(await refusal('/v1/jobs/bulk/retry', { json: { filter: { all: false }, dryRun: true } })).toMatchObject({ field: 'filter.all', message: 'filter.all: must be true' });
    // a set the engine holds as rows, not as a literal: its refusal reads them
    const weight = await refusal('/v1/jobs', { json: { type: 'uppercase', payload: { text: 'x' }, weight: 'gigantic' } });
    expect(weight).toMatchObject({ field: 'weight', message: expect.stringMatching(/^unknown weight class "gigantic": must be one of (?=.*"light")(?=.*"playwright")(?=.*"heavy")/) });
  });
});
