// Postgres matrix: pool capacity, held exactly under concurrent claims.
import { beforeAll, describe, expect, it } from 'vitest';
import { claimJobs, completeJob, enqueue, enqueueBatch, getJob, rescueExpiredLeases, ValidationError, type Job } from '../../queue/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { expectSqlRefusal } from '../support/refusals.ts';

// The capacity model of migrations/0170: weight classes costing their memory in GB with explicit
// escalation targets, a largest class per pool, and a pool's capacity by time of day.

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});

const LEASE = 120_000;
const utc = (iso: string) => new Date(`${iso}Z`);
const COST: Record<string, number> = { light: 3, playwright: 6, heavy: 8 };

/** A fresh pool: its capacity row, and windows as [name, starts, ends, max_running_weight]. */
async function pool(name: string, maxRunningWeight: number, maxWeight: string | null, windows: Array<[string, string, string, number]> = []) {
  await db.sql`insert into worker.pool_capacity (pool, enabled, max_running_weight, max_weight) values (${name}, true, ${maxRunningWeight}, ${maxWeight})`;
  for (const [w, starts, ends, max] of windows) {
    await db.sql`insert into worker.pool_capacity_windows (pool, name, starts, ends, max_running_weight) values (${name}, ${w}, ${starts}, ${ends}, ${max})`;
  }
}

async function runningWeight(p: string, now: Date): Promise<number> {
  const [row] = await db.sql`
    select coalesce(sum(w.cost), 0)::int as weight from worker.jobs j join worker.weight_classes w on w.name = j.weight
     where j.status = 'running' and j.running_pool = ${p} and j.locked_until >= ${now}`;
  return row!.weight;
}

describe('the weight classes', () => {
  it('are the manual\'s three, costing their memory in GB, ranked by it, each escalating to heavy but heavy', async () => {
    const rows = await db.sql`select name, rank, cost, escalates_to from worker.weight_classes order by rank`;
    expect(rows.map((r) => ({ ...r }))).toEqual([
      { name: 'light', rank: 1, cost: 3, escalates_to: 'heavy' },
      { name: 'playwright', rank: 2, cost: 6, escalates_to: 'heavy' },
      { name: 'heavy', rank: 3, cost: 8, escalates_to: null },
    ]);
  });
});

describe('a job pinned to a pool above its largest class', () => {
  beforeAll(async () => {
    await pool('pw', 18, 'playwright');
    await pool('small', 3, null, [['burst', '02:00', '03:00', 8]]);
    await pool('flat', 3, null);
  });

  it('is refused over SQL, single and batch (the plain batch shape too), naming weight, the class, the pool and its max class', async () => {
    const message = /weight "heavy" is above pool "pw"'s largest class \(max_weight playwright\)/;
    await expectSqlRefusal(db.sql, () => db.sql`select * from worker.enqueue_job(type => 'uppercase', payload => '{"text":"x"}', pool => 'pw', weight => 'heavy')`, 'weight', message);
    // a plain batch element with a pool is never taken set-wise: it is checked like any other
    await expectSqlRefusal(
      db.sql,
      () => db.sql`select * from worker.enqueue_jobs(${db.sql.json([{ type: 'uppercase', payload: { text: 'ok' } }, { type: 'uppercase', payload: { text: 'x' }, pool: 'pw', weight: 'heavy' }])})`,
      'jobs[1].weight',
      /^jobs\[1\]: weight "heavy" is above pool "pw"'s largest class \(max_weight playwright\)/,
    );
    await expectSqlRefusal(
      db.sql,
      () => db.sql`select * from worker.enqueue_jobs(${db.sql.json([{ type: 'uppercase', payload: { text: 'x' }, pool: 'pw', weight: 'heavy', submitKey: 'pw-1' }])})`,
      'jobs[0].weight',
      message,
    );
  });

  it('is refused from TypeScript (single and batch) with a ValidationError naming weight', async () => {
    const error = await enqueue(db.sql, { type: 'uppercase', payload: { text: 'x' }, pool: 'pw', weight: 'heavy' }).catch((e) => e);
    expect(error).toBeInstanceOf(ValidationError);
    expect(error).toMatchObject({ field: 'weight' });
    expect(error.message).toMatch(/above pool "pw"'s largest class \(max_weight playwright\)/);
    await expect(enqueueBatch(db.sql, [{ type: 'uppercase', payload: { text: 'x' }, pool: 'pw', weight: 'heavy' }]))
      .rejects.toMatchObject({ name: 'ValidationError', field: 'jobs[0].weight' });
  });

  it('is accepted at or below the pool\'s class; the capacity check takes the pool\'s largest window', async () => {
    for (const weight of ['light', 'playwright']) {
      expect((await enqueue(db.sql, { type: 'uppercase', payload: { text: 'x' }, pool: 'pw', weight })).job).toMatchObject({ pool: 'pw', weight });
    }
    // 8 fits the 02:00-03:00 window of `small` (its default is 3): claimable then, so accepted
    expect((await enqueue(db.sql, { type: 'uppercase', payload: { text: 'x' }, pool: 'small', weight: 'heavy' })).job.weight).toBe('heavy');
    await expectSqlRefusal(
      db.sql,
      () => db.sql`select * from worker.enqueue_job(type => 'uppercase', payload => '{"text":"x"}', pool => 'flat', weight => 'playwright')`,
      'weight',
      /weight "playwright" costs 6, more than pool "flat" can ever run \(max_running_weight 3\)/,
    );
  });
});

describe('claims and a pool\'s largest class', () => {
  it('a runner of a pool with max_weight playwright skips heavy jobs; unpinned heavy jobs stay for another runner', async () => {
    await pool('pw-claim', 100, 'playwright');
    const now = utc('2031-06-01T10:00:00');
    const heavy = (await enqueue(db.sql, { type: 'uppercase', payload: { text: 'h' }, weight: 'heavy', priority: 1 }, { now })).job;
    const pw = (await enqueue(db.sql, { type: 'uppercase', payload: { text: 'p' }, weight: 'playwright', pool: 'pw-claim', priority: 2 }, { now })).job;
    const light = (await enqueue(db.sql, { type: 'uppercase', payload: { text: 'l' }, priority: 3 }, { now })).job;
    // limit 1, twice: the walk passes over the heavy job rather than stopping at it
    const first = await claimJobs(db.sql, { workerId: 'pw-1', pool: 'pw-claim', limit: 1, now });
    const second = await claimJobs(db.sql, { workerId: 'pw-2', pool: 'pw-claim', limit: 5, now });
    expect([...first, ...second].map((j) => j.id)).toEqual([pw.id, light.id]);
    expect((await getJob(db.sql, heavy.id))!.job.status).toBe('queued');
    const [elsewhere] = await claimJobs(db.sql, { workerId: 'big', pool: null, limit: 5, now });
    expect(elsewhere).toMatchObject({ id: heavy.id, weight: 'heavy' });
    for (const job of [...first, ...second, elsewhere!]) await completeJob(db.sql, job, null, { now });
  });
});

describe('escalation after a crash follows each class\'s target', () => {
  const T0 = utc('2031-07-01T10:00:00');
  const at = (ms: number) => new Date(T0.getTime() + ms);

  async function crash(job: Job, pool: string | null, ms: number) {
    const [claimed] = await claimJobs(db.sql, { workerId: 'crashes', pool, limit: 1, now: at(ms), types: ['countdown'] });
    expect(claimed?.id).toBe(job.id);
    return rescueExpiredLeases(db.sql, { now: at(ms + LEASE + 1) });
  }

  it('light -> heavy, playwright -> heavy (not the next rank), and heavy ends oom_killed', async () => {
    for (const from of ['light', 'playwright']) {
      const { job } = await enqueue(db.sql, { type: 'countdown', payload: { n: 1 }, weight: from, maxAttempts: 5 }, { now: T0 });
      expect(await crash(job, null, 0)).toEqual({ requeued: 1, failed: 0, oomKilled: 0 });
      const after = (await getJob(db.sql, job.id))!;
      expect(after.job).toMatchObject({ status: 'queued', weight: 'heavy', crashes: 1 });
      expect(after.events.find((e) => e.kind === 'escalated')!.detail).toEqual({ from, to: 'heavy' });
      expect(await crash(job, null, 10 * LEASE)).toEqual({ requeued: 0, failed: 0, oomKilled: 1 });
      const done = (await getJob(db.sql, job.id))!;
      expect(done.job).toMatchObject({ status: 'oom_killed', weight: 'heavy', crashes: 2 });
      expect(done.job.lastError).toMatch(/top weight class \(heavy, which escalates to none\)/);
      expect(done.events.map((e) => e.kind)).toEqual(['enqueued', 'claimed', 'lease_expired', 'escalated', 'claimed', 'lease_expired', 'oom_killed']);
      const [alert] = await db.sql`select kind from worker.alerts where job_id = ${job.id}`;
      expect(alert!.kind).toBe('lease_oom');
    }
  });

  it('a crash on the final attempt still ends failed, at a class that escalates', async () => {
    const { job } = await enqueue(db.sql, { type: 'countdown', payload: { n: 1 }, weight: 'playwright', maxAttempts: 1 }, { now: T0 });
    expect(await crash(job, null, 20 * LEASE)).toEqual({ requeued: 0, failed: 1, oomKilled: 0 });
    expect((await getJob(db.sql, job.id))!.job).toMatchObject({ status: 'failed', weight: 'playwright' });
  });

  it('a pinned job whose target is above its pool\'s max class ends oom_killed, with a lease_oom alert naming class, target and limit', async () => {
    await pool('pw-crash', 100, 'playwright');
    const { job } = await enqueue(db.sql, { type: 'countdown', payload: { n: 1 }, weight: 'playwright', pool: 'pw-crash', maxAttempts: 5 }, { now: T0 });
    expect(await crash(job, 'pw-crash', 30 * LEASE)).toEqual({ requeued: 0, failed: 0, oomKilled: 1 });
    const after = (await getJob(db.sql, job.id))!;
    expect(after.job).toMatchObject({ status: 'oom_killed', weight: 'playwright' });
    expect(after.job.lastError).toMatch(/lease expired at playwright, and pool pw-crash cannot run its escalation \(heavy is above its max_weight playwright\)/);
    expect(after.events.at(-1)).toMatchObject({ kind: 'oom_killed', detail: { weight: 'playwright', next: 'heavy', pool: 'pw-crash', maxWeight: 'playwright' } });
    const [alert] = await db.sql`select kind, message from worker.alerts where job_id = ${job.id}`;
    expect(alert!.kind).toBe('lease_oom');
    expect(alert!.message).toMatch(/ended oom_killed after its lease expired at playwright: its escalation, heavy, is above pool pw-crash's max_weight playwright/);
  });

  it('a pinned job whose target costs more than any window of its pool ends oom_killed; one a window can run escalates', async () => {
    await pool('narrow', 6, null, [['day', '08:00', '20:00', 7]]);
    await pool('wide', 6, null, [['night', '20:00', '08:00', 8]]);
    const narrow = (await enqueue(db.sql, { type: 'countdown', payload: { n: 1 }, pool: 'narrow', maxAttempts: 5 }, { now: T0 })).job;
    expect(await crash(narrow, 'narrow', 40 * LEASE)).toEqual({ requeued: 0, failed: 0, oomKilled: 1 });
    expect((await getJob(db.sql, narrow.id))!.job.lastError).toMatch(/pool narrow cannot run its escalation \(heavy costs 8, max_running_weight 7\)/);
    const wide = (await enqueue(db.sql, { type: 'countdown', payload: { n: 1 }, pool: 'wide', maxAttempts: 5 }, { now: T0 })).job;
    expect(await crash(wide, 'wide', 50 * LEASE)).toEqual({ requeued: 1, failed: 0, oomKilled: 0 });
    expect((await getJob(db.sql, wide.id))!.job).toMatchObject({ status: 'queued', weight: 'heavy', pool: 'wide' });
  });
});

describe('capacity by time of day', () => {
  // prime 08:00-20:00 runs 24 (eight light jobs), night 20:00-08:00 runs 9, outside both (no
  // moment here: they cover the day) the pool's own 3
  beforeAll(async () => {
    await db.sql`update worker.jobs set status = 'cancelled', finished_at = now() where status in ('queued', 'running')`;
    await pool('tod', 3, null, [['prime', '08:00', '20:00', 24], ['night', '20:00', '08:00', 9]]);
    await pool('gap', 3, null, [['morning', '06:00', '09:00', 12]]);
  });

  const limitAt = async (p: string, iso: string) => (await db.sql`select worker.pool_limit_at(${p}, ${utc(iso)}) as v`)[0]!.v as number;

  /** What a claim at `iso` takes of enough queued light jobs in `p`, released again after. */
  async function claimedWeightAt(p: string, iso: string): Promise<number> {
    const now = utc(iso);
    await enqueueBatch(db.sql, Array.from({ length: 10 }, (_, i) => ({ type: 'uppercase', payload: { text: `${p}${i}` }, pool: p })), { now: new Date(now.getTime() - 1000) });
    const claimed = await claimJobs(db.sql, { workerId: 'tod', pool: p, limit: 100, now });
    for (const job of claimed) await completeJob(db.sql, job, null, { now });
    await db.sql`update worker.jobs set status = 'cancelled', finished_at = ${now} where status = 'queued' and pool = ${p}`;
    return claimed.reduce((n, j) => n + COST[j.weight]!, 0);
  }

  it('the limit in force at 07:59, 08:00, 19:59 and 20:00, and across midnight, by the pinned clock', async () => {
    const points: Array<[string, number]> = [
      ['2031-08-01T07:59:59.999', 9], ['2031-08-01T08:00:00', 24], ['2031-08-01T19:59:59.999', 24], ['2031-08-01T20:00:00', 9],
      ['2031-08-01T23:59:59', 9], ['2031-08-02T00:00:00', 9], ['2031-08-02T03:00:00', 9],
    ];
    for (const [iso, limit] of points) {
      expect(await limitAt('tod', iso), iso).toBe(limit);
      expect(await claimedWeightAt('tod', iso), iso).toBe(limit === 24 ? 24 : 9);
    }
    // outside every window the pool's own limit holds
    expect([await limitAt('gap', '2031-08-01T05:59:59'), await limitAt('gap', '2031-08-01T06:00:00'), await limitAt('gap', '2031-08-01T09:00:00')]).toEqual([3, 12, 3]);
    expect(await claimedWeightAt('gap', '2031-08-01T10:00:00')).toBe(3);
    expect(await claimedWeightAt('gap', '2031-08-01T07:00:00')).toBe(12);
  });

  it('when the limit drops, nothing running stops; claims wait until the running weight is under the new limit', async () => {
    const prime = utc('2031-08-03T19:59:00');
    const night = utc('2031-08-03T20:00:00');
    await enqueueBatch(db.sql, Array.from({ length: 12 }, (_, i) => ({ type: 'uppercase', payload: { text: `drop${i}` }, pool: 'tod' })), { now: prime });
    const running = await claimJobs(db.sql, { workerId: 'prime', pool: 'tod', limit: 100, now: prime });
    expect(running).toHaveLength(8);
    expect(await claimJobs(db.sql, { workerId: 'night', pool: 'tod', limit: 100, now: night })).toHaveLength(0);
    expect(await runningWeight('tod', night)).toBe(24);
    // 24 -> 9: done down to 9 (three light) leaves no room; at 6 one light fits again
    for (const job of running.slice(0, 5)) await completeJob(db.sql, job, null, { now: night });
    expect(await claimJobs(db.sql, { workerId: 'night', pool: 'tod', limit: 100, now: night })).toHaveLength(0);
    await completeJob(db.sql, running[5]!, null, { now: night });
    expect(await claimJobs(db.sql, { workerId: 'night', pool: 'tod', limit: 100, now: night })).toHaveLength(1);
    expect(await runningWeight('tod', night)).toBe(9);
    await db.sql`update worker.jobs set status = 'cancelled', finished_at = ${night} where status in ('queued', 'running') and pool = 'tod'`;
  });

  it('overlapping windows of one pool are refused, naming both; touching ones and other pools\' are not', async () => {
    const overlap = (starts: string, ends: string) =>
      db.sql`insert into worker.pool_capacity_windows (pool, name, starts, ends, max_running_weight) values ('tod', 'extra', ${starts}, ${ends}, 5)`.then(() => null, (e) => e);
    for (const [starts, ends, other] of [['19:00', '21:00', 'prime'], ['07:00', '07:30', 'night'], ['23:00', '01:00', 'night'], ['10:00', '11:00', 'prime']]) {
      const error = await overlap(starts!, ends!);
      expect(error, `${starts}-${ends}`).toMatchObject({ code: 'SB400', column_name: 'starts' });
      expect(error.message).toMatch(new RegExp(`^window "extra" \\(${starts} to ${ends}\\) of pool "tod" overlaps its window "${other}"`));
    }
    // an empty window, or one of the whole day (that is the pool's own max_running_weight), is no window
    await pool('solo', 3, null);
    for (const [starts, ends] of [['05:00', '05:00'], ['00:00', '24:00']]) {
      await expect(db.sql`insert into worker.pool_capacity_windows (pool, name, starts, ends, max_running_weight) values ('solo', 'all', ${starts!}, ${ends!}, 5)`)
        .rejects.toThrow(/pool_capacity_windows_not_empty/);
    }
    // moving a window onto another is refused the same way; moving it onto itself is not an overlap
    await expect(db.sql`update worker.pool_capacity_windows set ends = '21:00' where pool = 'tod' and name = 'prime'`).rejects.toMatchObject({ code: 'SB400' });
    await db.sql`update worker.pool_capacity_windows set max_running_weight = 24, starts = '08:00' where pool = 'tod' and name = 'prime'`;
    await db.sql`insert into worker.pool_capacity_windows (pool, name, starts, ends, max_running_weight) values ('gap', 'evening', '09:00', '10:00', 4)`;
    expect((await db.sql`select count(*)::int as n from worker.pool_capacity_windows where pool = 'tod'`)[0]!.n).toBe(2);
  });

  it('concurrent claimers, again and again, never take a pool past the limit of the window in force (and never start past a lowered one)', async () => {
    await pool('race', 3, null, [['prime', '08:00', '20:00', 40], ['night', '20:00', '08:00', 17]]);
    const weights = ['light', 'playwright', 'heavy'];
    const clients = Array.from({ length: 8 }, () => db.client(1));
    const start = utc('2031-08-05T19:59:00');
    await enqueueBatch(db.sql, Array.from({ length: 300 }, (_, i) => ({ type: 'uppercase', payload: { text: `r${i}` }, pool: 'race', weight: weights[i % 3] })), { now: start });
    let running: Job[] = [];
    for (let round = 0; round < 24; round++) {
      // 12 rounds in prime (19:59:00, +1 s each), 12 at night: the leases (2 min) outlive the switch
      const now = new Date(start.getTime() + round * 1000 + (round >= 12 ? 48_000 : 0));
      const limit = round >= 12 ? 17 : 40;
      const before = await runningWeight('race', now);
      const claims = (await Promise.all(clients.map((sql, i) => claimJobs(sql, { workerId: `race-${i}`, pool: 'race', limit: 2, now })))).flat();
      const after = await runningWeight('race', now);
      expect(after, `round ${round}`).toBe(before + claims.reduce((n, j) => n + COST[j.weight]!, 0));
      if (claims.length > 0) expect(after, `round ${round}`).toBeLessThanOrEqual(limit);
      else expect(before + 3 > limit || after > limit, `round ${round}: nothing claimed with room`).toBe(true);
      running = [...running, ...claims];
      // settle a third of what runs, so each round has room to fight over
      const settle = running.filter((_, i) => i % 3 === round % 3);
      for (const job of settle) await completeJob(db.sql, job, null, { now });
      running = running.filter((j) => !settle.includes(j));
    }
  });
});
