import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  claimJobs, claimLeaderLease, completeJob, continueJob, deliverPendingAlerts, enqueue, failJob, failJobPermanently,
  releaseLeaderLease, requeueJob, rescueExpiredLeases, retryJob, type AlertMessage,
} from '../../queue/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';

/** The operations side of migrations/0050_ops.sql: snapshots, leader churn, alert resolution, step statistics. */
let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});

const T0 = new Date('2026-10-01T12:00:00Z');
const at = (ms: number) => new Date(T0.getTime() + ms);
const MIN = 60_000;

class RecordingAlerts {
  sent: AlertMessage[] = [];
  async send(alert: AlertMessage) {
    this.sent.push(alert);
  }
}

async function settleAll() {
  await db.sql`update worker.jobs set status = 'cancelled', finished_at = now(), locked_until = null where status in ('queued', 'running')`;
}

describe('depth snapshots', () => {
  beforeEach(settleAll);

  it('records queued, due and running once per minute and forgets snapshots past retention', async () => {
    await enqueue(db.sql, { type: 'uppercase', payload: { text: 'due' }, runAt: at(0) }, { now: at(0) });
    await enqueue(db.sql, { type: 'uppercase', payload: { text: 'later' }, runAt: at(60 * MIN) }, { now: at(0) });
    await enqueue(db.sql, { type: 'uppercase', payload: { text: 'run' }, runAt: at(0), priority: 0 }, { now: at(0) });
    await claimJobs(db.sql, { workerId: 'w', limit: 1, now: at(0) });

    await db.sql`select worker.record_depth_snapshot(${at(5_000)})`;
    await db.sql`select worker.record_depth_snapshot(${at(30_000)})`; // the same minute: kept once
    const rows = await db.sql`select at, queued, due, running from worker.depth_snapshots where at >= ${at(-MIN)} order by at`;
    expect(rows).toEqual([{ at: at(0), queued: 2, due: 1, running: 1 }]);

    await db.sql`select worker.record_depth_snapshot(${at(8 * 24 * 60 * MIN)})`;
    const left = await db.sql`select at from worker.depth_snapshots where at >= ${at(-MIN)} order by at`;
    expect(left.map((r) => r.at)).toEqual([at(8 * 24 * 60 * MIN)]); // the first is older than 7 days now
  });
});

describe('leader churn', () => {
  it('records each acquisition, not renewals, and alerts once when the lease changes hands more than N times an hour', async () => {
    const start = at(10 * 24 * 60 * MIN);
    const t = (min: number) => new Date(start.getTime() + min * MIN);
    await claimLeaderLease(db.sql, 'pool-a', { ttlMs: MIN, now: t(0), name: 'churny' });
    await claimLeaderLease(db.sql, 'pool-a', { ttlMs: MIN, now: t(0.5), name: 'churny' }); // renewal
    for (let i = 1; i <= 4; i++) {
      await claimLeaderLease(db.sql, i % 2 ? 'pool-b' : 'pool-a', { ttlMs: MIN, now: t(i * 2), name: 'churny' });
    }
    const history = await db.sql`select generation::int, holder from worker.leader_history where name = 'churny' order by generation`;
    expect(history).toEqual([
      { generation: 1, holder: 'pool-a' }, { generation: 2, holder: 'pool-b' }, { generation: 3, holder: 'pool-a' },
      { generation: 4, holder: 'pool-b' }, { generation: 5, holder: 'pool-a' },
    ]);

    const churn = async (now: Date) => (await db.sql`select * from worker.check_leader_churn(3, ${3_600_000}, ${now})`)[0];
    expect(await churn(t(9))).toEqual({ opened: 1, resolved: 0 });
    expect(await churn(t(10))).toEqual({ opened: 0, resolved: 0 }); // the same open alert, not a second
    const open = await db.sql`select message, detail, occurrences from worker.alerts where kind = 'leader_churn' and key = 'churny' and resolved_at is null`;
    expect(open).toHaveLength(1);
    expect(open[0]!.message).toBe('leader lease "churny" changed hands 5 times in 60 min (more than 3)');
    expect(open[0]!.detail).toMatchObject({ changes: 5, holders: ['pool-a', 'pool-b', 'pool-a', 'pool-b', 'pool-a'] });
    expect(open[0]!.occurrences).toBe(2);

    const alerts = new RecordingAlerts();
    await deliverPendingAlerts(db.sql, alerts);
    await churn(t(11));
    await deliverPendingAlerts(db.sql, alerts);
    expect(alerts.sent.filter((a) => a.kind === 'leader_churn')).toHaveLength(1);

    // an hour after the burst, fewer than 4 acquisitions remain in the window: resolved
    expect(await churn(t(65))).toEqual({ opened: 0, resolved: 1 });
    const [row] = await db.sql`select resolved_at from worker.alerts where kind = 'leader_churn' and key = 'churny'`;
    expect(row!.resolved_at).toEqual(t(65));
  });

  it('an admin release followed by a new acquisition is one more generation in the history', async () => {
    await claimLeaderLease(db.sql, 'x', { name: 'released' });
    await releaseLeaderLease(db.sql, { name: 'released' });
    await claimLeaderLease(db.sql, 'y', { name: 'released' });
    const rows = await db.sql`select holder from worker.leader_history where name = 'released' order by generation`;
    expect(rows.map((r) => r.holder)).toEqual(['x', 'y']);
  });
});

describe('alerts resolved by an operator', () => {
  beforeEach(settleAll);

  it('a poison job requeued by an operator resolves its alert; failing again opens (and sends) a new one', async () => {
    const { job } = await enqueue(db.sql, { type: 'fail', payload: {}, maxAttempts: 1, priority: 0 });
    const [claimed] = await claimJobs(db.sql, { workerId: 'w', limit: 1 });
    expect(await retryJob(db.sql, claimed!, 'boom', 0)).toBe('failed');
    const open = () => db.sql`select id, resolved_at from worker.alerts where kind = 'poison_job' and job_id = ${job.id} order by id`;
    expect((await open()).map((r) => r.resolved_at)).toEqual([null]);

    await requeueJob(db.sql, job.id);
    expect((await open())[0]!.resolved_at).toBeInstanceOf(Date);

    const [again] = await claimJobs(db.sql, { workerId: 'w', limit: 1 });
    expect(await retryJob(db.sql, again!, 'boom again', 0)).toBe('failed');
    const rows = await open();
    expect(rows).toHaveLength(2);
    expect(rows[1]!.resolved_at).toBeNull();
    const alerts = new RecordingAlerts();
    await deliverPendingAlerts(db.sql, alerts);
    expect(alerts.sent.filter((a) => a.jobId === job.id).map((a) => a.id)).toEqual([Number(rows[1]!.id)]);
  });

  it('an operator failing a stuck job resolves its stuck_job alert; an engine failure does not resolve anything', async () => {
    const { job } = await enqueue(db.sql, { type: 'uppercase', payload: { text: 'stuck' }, priority: 0 });
    await claimJobs(db.sql, { workerId: 'w', limit: 1 });
    await db.sql`insert into worker.alerts (kind, key, job_id, message) values ('stuck_job', ${job.id}, ${job.id}, 'stuck')`;
    await failJobPermanently(db.sql, job.id, 'operator gave up');
    const [alert] = await db.sql`select resolved_at from worker.alerts where kind = 'stuck_job' and job_id = ${job.id}`;
    expect(alert!.resolved_at).toBeInstanceOf(Date);

    const other = await enqueue(db.sql, { type: 'uppercase', payload: { text: 'x' }, priority: 0 });
    const [c] = await claimJobs(db.sql, { workerId: 'w', limit: 1 });
    await failJob(db.sql, c!, 'permanent');
    const [poison] = await db.sql`select resolved_at from worker.alerts where kind = 'poison_job' and job_id = ${other.job.id}`;
    expect(poison!.resolved_at).toBeNull();
  });
});

describe('step statistics rolled up from job events', () => {
  beforeEach(settleAll);

  const stats = async (type: string) =>
    (await db.sql`select outcome, bucket::int, steps::int, seconds from worker.current_step_stats() where type = ${type} order by outcome, bucket`)
      .map((r) => ({ outcome: r.outcome as string, bucket: r.bucket as number, steps: r.steps as number, seconds: Math.round((r.seconds as number) * 1000) / 1000 }));
  const counters = async (type: string) =>
    Object.fromEntries((await db.sql`select counter, n::int from worker.current_job_counters() where type = ${type}`).map((r) => [r.counter, r.n]));

  it('times each step from its claim to its settle, counts retries and poison jobs, and the roll-up changes no number', async () => {
    // a fresh type, so this test's numbers are its own
    await db.sql`insert into worker.job_types (type) values ('stats_probe') on conflict do nothing`;
    const s = (ms: number) => at(20 * 24 * 60 * MIN + ms);
    const claimOne = async (ms: number) => (await claimJobs(db.sql, { workerId: 'w', limit: 1, now: s(ms) }))[0]!;

    // job 1: a 30 ms step that continues, then a 1.5 s step that completes
    await enqueue(db.sql, { type: 'stats_probe', payload: {}, priority: 0 }, { now: s(0) });
    let c = await claimOne(0);
    await continueJob(db.sql, c, { step: 'two' }, { now: s(30) });
    c = await claimOne(100);
    await completeJob(db.sql, c, null, { now: s(1600) });
    // job 2: a 0.2 s step that is retried, then a 20 s step that exhausts its attempts (poison)
    await enqueue(db.sql, { type: 'stats_probe', payload: {}, priority: 0, maxAttempts: 2 }, { now: s(2000) });
    c = await claimOne(2000);
    expect(await retryJob(db.sql, c, 'flaky', 0, { now: s(2200) })).toBe('queued');
    c = await claimOne(3000);
    expect(await retryJob(db.sql, c, 'still flaky', 0, { now: s(23_000) })).toBe('failed');
    // job 3: crashes; the rescue finds its lease expired on the final attempt (one lost step, poison)
    await enqueue(db.sql, { type: 'stats_probe', payload: {}, priority: 0, maxAttempts: 1 }, { now: s(30_000) });
    await claimOne(30_000);
    await rescueExpiredLeases(db.sql, { now: s(30_000 + 10 * MIN) });
    // job 4: failed by an operator while queued: not a step, not poison
    const manual = await enqueue(db.sql, { type: 'stats_probe', payload: {}, runAt: s(99 * MIN) }, { now: s(40_000) });
    await failJobPermanently(db.sql, manual.job.id, 'not wanted', { now: s(41_000) });

    const expected = [
      { outcome: 'continued', bucket: 1, steps: 1, seconds: 0.03 },
      { outcome: 'done', bucket: 6, steps: 1, seconds: 1.5 },
      { outcome: 'failed', bucket: 9, steps: 1, seconds: 20 },
      { outcome: 'lost', bucket: 12, steps: 1, seconds: 600 }, // the rescue's failed event after lease_expired is not a second step
      { outcome: 'retried', bucket: 3, steps: 1, seconds: 0.2 },
    ];
    expect(await stats('stats_probe')).toEqual(expected);
    expect(await counters('stats_probe')).toEqual({ retry: 1, poison: 2 });

    const rolled = (await db.sql`select worker.rollup_job_events(0) as n`)[0]!.n as number;
    expect(rolled).toBeGreaterThan(0);
    expect((await db.sql`select worker.rollup_job_events(0) as n`)[0]!.n).toBe(0);
    expect(await stats('stats_probe')).toEqual(expected);
    expect(await counters('stats_probe')).toEqual({ retry: 1, poison: 2 });
    const [tail] = await db.sql`select count(*)::int as n from worker.step_rows((select last_event_id from worker.event_rollup), 9223372036854775807)`;
    expect(tail!.n).toBe(0);
  });

  it('rolls up only events older than the lag, and at most the limit per pass', async () => {
    await db.sql`insert into worker.job_types (type) values ('lag_probe') on conflict do nothing`;
    await db.sql`select worker.rollup_job_events(0)`;
    const now = new Date();
    for (let i = 0; i < 3; i++) {
      await enqueue(db.sql, { type: 'lag_probe', payload: {}, priority: 0 });
      const [c] = await claimJobs(db.sql, { workerId: 'w', limit: 1 });
      await completeJob(db.sql, c!, null);
    }
    // each job wrote its enqueued event as a row and holds its claimed and done events (0160):
    // three events and three done rows, all younger than a minute
    expect((await db.sql`select worker.rollup_job_events(60000, 100000, ${now}) as n`)[0]!.n).toBe(0);
    // the limit applies to each: two done rows and two events, then the one of each left
    expect((await db.sql`select worker.rollup_job_events(0, 2) as n`)[0]!.n).toBe(4);
    expect((await stats('lag_probe')).reduce((n, r) => n + r.steps, 0)).toBe(3); // the unrolled tail counted too
    expect((await db.sql`select worker.rollup_job_events(0, 100) as n`)[0]!.n).toBe(2);
    expect((await db.sql`select worker.rollup_job_events(0, 100) as n`)[0]!.n).toBe(0);
    expect((await stats('lag_probe')).reduce((n, r) => n + r.steps, 0)).toBe(3);
  });
});
