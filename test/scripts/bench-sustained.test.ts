import { setTimeout as sleep } from 'node:timers/promises';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { openServerAt, type BenchServer } from '../../bench/server.ts';
import { sustained } from '../../bench/sustained.ts';
import { engineSystem } from '../../bench/systems/engine.ts';

const settings = { connections: 2, concurrency: 32, batch: 16, idlePollMs: 25 };

describe('the sustained bench, against the test server', () => {
  let server: BenchServer;
  beforeAll(async () => {
    server = await openServerAt(inject('adminDatabaseUrl'));
  });
  afterAll(() => server.close());

  it('runs every job it offered and reports latency, CPU and the rows left', async () => {
    const r = await sustained(server, engineSystem('test'), settings, { rate: 200, seconds: 1 }, { retentionSeconds: 10, intervalSeconds: 1 });
    expect(r.sent).toBe(200);
    expect(r.offeredPerSec).toBeGreaterThan(0);
    expect(r.achievedPerSec).toBeGreaterThan(0);
    expect(r.p99Ms).toBeGreaterThanOrEqual(r.p50Ms);
    expect(r.cpu.nodeMs).toBeGreaterThan(0);
    // retention is 10 s and the run about 2 s: every job is still there; a batch-enqueued job
    // run in one step holds its events on its row (0160), so there is no event row
    expect(r.rowsLeft.jobs).toBe(200);
    expect(r.rowsLeft.events).toBe(0);
  });

  it("our instance prunes finished jobs and their events on its sweep's cadence when given a retention", async () => {
    const db = await server.freshDatabase('sustained_prune');
    const probe = postgres(db.url, { max: 1, onnotice: () => {} });
    const instance = await engineSystem('test').install(db.url, settings, { retentionSeconds: 0, intervalSeconds: 1 });
    try {
      await instance.enqueueBulk(50);
      await instance.startWorkers(() => {});
      let rows = await instance.rowsLeft(probe);
      for (let i = 0; i < 100 && (rows.jobs > 0 || rows.events! > 0); i++) {
        await sleep(100);
        rows = await instance.rowsLeft(probe);
      }
      expect(rows).toEqual({ jobs: 0, events: 0 });
    } finally {
      await instance.close();
      await probe.end({ timeout: 5 });
      await db.drop();
    }
  });
});
