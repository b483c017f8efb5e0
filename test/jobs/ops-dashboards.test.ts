import { readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { claimJobs, enqueue, JOB_STATUSES } from '../../queue/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';

/**
 * ops/grafana/starbase-worker.json: the SQL panels run against the real schema, and the panels
 * are wired to the data sources the import asks for. (Its PromQL is checked against a real
 * scrape in test/worker/metrics.test.ts.)
 */
interface Target { datasource: { uid: string }; expr?: string; rawSql?: string; format?: string }
interface Panel { id: number; title: string; type: string; datasource: { uid: string }; targets: Target[]; fieldConfig: { overrides: Array<{ matcher: { options: string }; properties: Array<{ id: string; value: unknown }> }> } }
const dashboard = JSON.parse(readFileSync(new URL('../../ops/grafana/starbase-worker.json', import.meta.url), 'utf8')) as {
  __inputs: Array<{ name: string }>;
  panels: Panel[];
  uid: string;
};

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
  await enqueue(db.sql, { type: 'uppercase', payload: { text: 'a' }, priority: 0 });
  await enqueue(db.sql, { type: 'countdown', payload: { n: 1 } });
  await claimJobs(db.sql, { workerId: 'grafana-test:1', limit: 1 });
});

describe('the Grafana dashboard', () => {
  it('has unique panel ids and uses only the data sources it declares', () => {
    const ids = dashboard.panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    const inputs = new Set(dashboard.__inputs.map((i) => `\${${i.name}}`));
    for (const p of dashboard.panels) {
      expect(inputs.has(p.datasource.uid), p.title).toBe(true);
      for (const t of p.targets) expect(t.datasource.uid, p.title).toBe(p.datasource.uid);
    }
  });

  it('shows queued, running, done and failed counters, queue depth over time, active jobs and recent jobs', () => {
    const titles = dashboard.panels.map((p) => p.title);
    expect(titles).toEqual(expect.arrayContaining(['Queued', 'Running', 'Done', 'Failed', 'Queue depth', 'Active jobs', 'Recent jobs']));
    expect(dashboard.panels.find((p) => p.title === 'Queue depth')!.type).toBe('timeseries');
  });

  it('runs every SQL panel against the schema, with the columns the panels colour', async () => {
    const sqlPanels = dashboard.panels.filter((p) => p.targets.some((t) => t.rawSql));
    expect(sqlPanels.map((p) => p.title)).toEqual(['Active jobs', 'Recent jobs']);
    const active = await db.sql.unsafe(sqlPanels[0]!.targets[0]!.rawSql!);
    expect(active).toHaveLength(1);
    expect(active[0]).toMatchObject({ type: 'uppercase', owner: 'grafana-test:1', step: 'start' });
    expect(typeof active[0]!.running_for).toBe('number');
    const recent = await db.sql.unsafe(sqlPanels[1]!.targets[0]!.rawSql!);
    expect(recent.map((r) => r.status).sort()).toEqual(['queued', 'running']);
    expect(Object.keys(recent[0]!)).toEqual(['time', 'job', 'type', 'status', 'step', 'attempts', 'finished_at', 'last_error']);
    for (const p of sqlPanels) {
      const coloured = p.fieldConfig.overrides.map((o) => o.matcher.options);
      const columns = Object.keys((p.title === 'Active jobs' ? active : recent)[0]!);
      for (const c of coloured) expect(columns).toContain(c);
    }
  });

  it('gives every job status a colour in the recent jobs table', () => {
    const recent = dashboard.panels.find((p) => p.title === 'Recent jobs')!;
    const mappings = recent.fieldConfig.overrides[0]!.properties.find((p) => p.id === 'mappings')!.value as Array<{ options: Record<string, { color: string }> }>;
    expect(Object.keys(mappings[0]!.options).sort()).toEqual([...JOB_STATUSES].sort());
  });
});
