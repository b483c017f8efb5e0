import { beforeAll, describe, expect, expectTypeOf, it } from 'vitest';
import {
  claimJobs, completeJob, enqueue, MAINTENANCE_FAILED, MAINTENANCE_PASSES, MAINTENANCE_SERVICES, runMaintenance,
  type AlertMessage, type Alerts, type MaintenanceConfig, type MaintenanceRunOptions, type MaintenanceServices, type PassError,
  type PruneCounts, type RescueCounts, type Schedule, type ScheduleCheck,
} from '../../queue/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';

/**
 * The maintenance scheduler against a real database: one clock (every pass is handed the same
 * `now`, and with a pinned clock every statement runs at it), a pass that throws does not stop
 * the others, and each pass's counts come back typed.
 */
let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});

const MIN = 60_000;
const HOUR = 60 * MIN;
const DAY = 24 * HOUR;
// Years after the database's own clock: only a pass that uses the pinned instant acts on the rows below.
const NOW = new Date('2030-01-01T00:05:00Z');
const before = (ms: number) => new Date(NOW.getTime() - ms);
const SECRET = 'sk_live_scheduler_secret';

const CONFIG: MaintenanceConfig = {
  cronBackfillMs: DAY, scheduleGraceMs: HOUR, stuckJobMs: 2 * HOUR, unclaimedJobMs: 15 * MIN,
  finishedRetentionMs: 7 * DAY, failedRetentionMs: 30 * DAY, eventRetentionMs: 30 * DAY,
};
const every15: Schedule = {
  name: 'sched_test', cron: '*/15 * * * *', type: 'uppercase',
  slotKey: (slot) => `sched_test:${slot.toISOString()}`, payload: () => ({ text: 'slot' }),
};

class RecordingAlerts implements Alerts {
  sent: AlertMessage[] = [];
  async send(alert: AlertMessage): Promise<void> {
    this.sent.push(alert);
  }
}

function options(now: Date, extra: Partial<MaintenanceRunOptions> = {}): MaintenanceRunOptions & { lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  return {
    now, clock: 'pinned', schedules: [every15], alerts: new RecordingAlerts(), config: CONFIG,
    log: (line) => void lines.push(line), scrub: (text) => text.replaceAll(SECRET, '[redacted]'), lines, ...extra,
  };
}

describe('runMaintenance', () => {
  it('runs every pass at the one pinned instant and returns typed counts', async () => {
    // done 8 days before NOW: past the 7-day retention
    await enqueue(db.sql, { type: 'uppercase', payload: { text: 'old' }, priority: 1 }, { now: before(8 * DAY) });
    const [old] = await claimJobs(db.sql, { workerId: 'w:1', limit: 1, now: before(8 * DAY) });
    await completeJob(db.sql, old!, null, { now: before(8 * DAY - 1000) });
    // claimed an hour before NOW: its lease has expired at NOW (not at the database's clock)
    await enqueue(db.sql, { type: 'uppercase', payload: { text: 'lost' }, priority: 1 }, { now: before(HOUR) });
    await claimJobs(db.sql, { workerId: 'gone:1', limit: 1, now: before(HOUR) });
    // running for 3 h at NOW on a live lease: stuck
    const stuck = (await enqueue(db.sql, { type: 'uppercase', payload: { text: 'slow' }, priority: 1 }, { now: before(3 * HOUR) })).job;
    await claimJobs(db.sql, { workerId: 'slow:1', limit: 1, now: before(3 * HOUR) });
    await db.sql`update worker.jobs set locked_until = ${new Date(NOW.getTime() + HOUR)} where id = ${stuck.id}`;
    // due an hour before NOW, of a type nobody runs: unclaimed
    await db.sql`insert into worker.job_types (type) values ('sched_nobody_runs') on conflict do nothing`;
    await enqueue(db.sql, { type: 'sched_nobody_runs', payload: {}, runAt: before(HOUR) }, { now: before(HOUR) });

    const o = options(NOW);
    const run = await runMaintenance(db.sql, o);

    expect(run.failed).toEqual([]);
    expect(Object.keys(run.results)).toEqual([...MAINTENANCE_PASSES]);
    expectTypeOf(run.results.rescued).toEqualTypeOf<RescueCounts | PassError | undefined>();
    expectTypeOf(run.results.pruned).toEqualTypeOf<PruneCounts | PassError | undefined>();
    expectTypeOf(run.results.schedules).toEqualTypeOf<ScheduleCheck | PassError | undefined>();
    expectTypeOf(run.results.backfilled).toEqualTypeOf<string[] | PassError | undefined>();
    expect(run.results).toMatchObject({
      syncSchedules: true,
      rescued: { requeued: 1, failed: 0, oomKilled: 0 },
      backfilled: ['sched_test:2030-01-01T00:00:00.000Z'],
      schedules: { missed: ['sched_test'], invalid: [] },
      stuck: { opened: 1, resolved: 0 },
      // the nobody-runs job, and the backfilled slot's job: enqueued at the database's clock, it
      // has waited years at NOW
      unclaimed: { opened: 2 },
      pruned: { jobs: 1 },
      leaderChurn: { opened: 0, resolved: 0 },
      depthSnapshot: true,
    });
    expect(run.results.eventsRolledUp).toEqual(expect.any(Number));
    // every alert the run opened is stamped NOW and went out in the same run, stamped NOW
    const alerts = await db.sql`select kind, key, opened_at, notified_at from worker.alerts where resolved_at is null order by kind, key`;
    expect(alerts.map((a) => `${a.kind}:${a.kind === 'stuck_job' ? '' : a.key}`))
      .toEqual(['schedule_missed:sched_test', 'stuck_job:', 'unclaimed_jobs:sched_nobody_runs', 'unclaimed_jobs:uppercase']);
    for (const a of alerts) expect(a).toMatchObject({ opened_at: NOW, notified_at: NOW });
    expect(run.results.alertsSent).toBe(4);
    expect(await db.sql`select 1 from worker.depth_snapshots where at = date_trunc('minute', ${NOW}::timestamptz)`).toHaveLength(1);
    expect(o.lines).toEqual([]);
  });

  it('hands every pass the same now; a pass that throws is logged, alerted and scrubbed, and the others still run', async () => {
    const now = new Date(NOW.getTime() + MIN);
    const seen: { pass: string; now: Date }[] = [];
    const services = Object.fromEntries(
      MAINTENANCE_PASSES.map((pass) => [pass, {
        runOnce: async (ctx: Parameters<MaintenanceServices[typeof pass]['runOnce']>[0]) => {
          seen.push({ pass, now: ctx.now });
          if (pass === 'pruned') throw Object.assign(new Error(`prune refused (token ${SECRET})`), { code: 'P0001' });
          return MAINTENANCE_SERVICES[pass].runOnce(ctx);
        },
      }]),
    ) as unknown as MaintenanceServices;
    const o = options(now, { services });
    const run = await runMaintenance(db.sql, o);

    expect(seen.map((s) => s.pass)).toEqual([...MAINTENANCE_PASSES]);
    for (const s of seen) expect(s.now).toBe(now);
    expect(run.failed).toEqual(['pruned']);
    expect(run.results.pruned).toEqual({ error: 'prune refused (token [redacted])' });
    expect(Object.keys(run.results)).toEqual([...MAINTENANCE_PASSES]);
    for (const pass of MAINTENANCE_PASSES.filter((p) => p !== 'pruned')) expect(run.results[pass]).not.toHaveProperty('error');
    expect(o.lines).toContainEqual(expect.objectContaining({ level: 'error', msg: 'maintenance pass failed', pass: 'pruned', code: 'P0001' }));

    const [alert] = await db.sql`
      select key, message, detail, opened_at, notified_at from worker.alerts where kind = ${MAINTENANCE_FAILED} and resolved_at is null`;
    expect(alert).toEqual({
      key: 'pruned', message: 'maintenance pass pruned failed: prune refused (token [redacted])',
      detail: { pass: 'pruned', code: 'P0001' }, opened_at: now, notified_at: now,
    });

    // the next run, where the pass succeeds, resolves its alert at that run's now
    const later = new Date(now.getTime() + MIN);
    expect((await runMaintenance(db.sql, options(later))).failed).toEqual([]);
    expect(await db.sql`select resolved_at from worker.alerts where kind = ${MAINTENANCE_FAILED}`).toEqual([{ resolved_at: later }]);
  });

  it("with the database's clock (the tick's), leases are expired by the database's now(), not by the run's instant", async () => {
    const claimedAt = new Date(NOW.getTime() + 10 * MIN);
    await enqueue(db.sql, { type: 'uppercase', payload: { text: 'held' }, priority: 1000 }, { now: claimedAt });
    await claimJobs(db.sql, { workerId: 'far:1', limit: 1, now: claimedAt });
    const dayLater = new Date(claimedAt.getTime() + DAY);
    const tick = await runMaintenance(db.sql, options(dayLater, { clock: 'database' }));
    expect(tick.results.rescued).toEqual({ requeued: 0, failed: 0, oomKilled: 0 });
    const pinned = await runMaintenance(db.sql, options(dayLater));
    expect(pinned.results.rescued).toMatchObject({ requeued: 1 });
  });
});
