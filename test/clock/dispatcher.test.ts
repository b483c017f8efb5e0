// Postgres matrix: dispatcher shards claiming concurrently through Hyperdrive.
import { describe, expect, it } from 'vitest';
import { disarmDispatcher, ensureDispatcherArmed, wakeDispatcher } from '../../functions/dispatch/wake.ts';
import { createClockHarness } from './support.ts';

// These tests run on real time: what they check is that Durable Object alarms, not a trigger,
// start the work. Nothing here calls the tick or a request at the moment work falls due.

describe('the dispatcher keeps time', () => {
  it('a job inserted with plain SQL starts without any request or tick, found by the idle poll', async () => {
    const h = createClockHarness('sql-insert');
    expect(await ensureDispatcherArmed(h.env, h.pool)).toBe(true); // what the tick does: nobody had armed it
    // let the first alarm find nothing, so the insert below is found by an idle poll
    await h.waitFor(async () => (await h.statuses())[0]!.idlePolls >= 1, 10_000);
    const [id] = await h.insert([{ type: 'uppercase', payload: { text: 'found' } }]);
    const job = await h.waitFor(async () => {
      const [row] = await h.sql`select status, created_at, started_at from worker.jobs where id = ${id!}`;
      return row?.status === 'done' ? row : null;
    }, 10_000);
    const waitedMs = job.started_at.getTime() - job.created_at.getTime();
    expect(waitedMs).toBeLessThan(5_000); // the idle poll is 1 s; without the dispatcher it waits for a tick
    // and the API shows it: shard 0 armed (the idle poll), its alarms, the step it claimed (its
    // counts are written when the alarm that ran the step ends)
    await h.waitFor(async () => (await h.statuses())[0]!.claimed >= 1, 5_000);
    const res = await h.request('/v1/dispatchers', { token: 'metrics' });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { pool: string; shards: Array<{ shard: number; alarmAt: string | null; alarms: number; idlePolls: number; claimed: number }> };
    expect(body.pool).toBe(h.pool);
    expect(body.shards.map((s) => s.shard)).toEqual([0, 1, 2, 3]);
    expect(body.shards[0]!.alarms).toBeGreaterThanOrEqual(2);
    expect(body.shards[0]!.idlePolls).toBeGreaterThanOrEqual(1);
    expect(body.shards[0]!.claimed).toBeGreaterThanOrEqual(1);
    expect(body.shards.slice(1).every((s) => s.alarms === 0 && s.alarmAt === null)).toBe(true);
  });

  it('a step due mid-minute runs at its time: each step of a countdown with delays starts when due', async () => {
    const h = createClockHarness('mid-minute');
    await ensureDispatcherArmed(h.env, h.pool);
    const [id] = await h.insert([{ type: 'countdown', payload: { n: 3, delayMs: 700 } }]);
    const done = await h.waitFor(async () => {
      const [row] = await h.sql`select status from worker.jobs where id = ${id!}`;
      return row?.status === 'done';
    }, 20_000);
    expect(done).toBe(true);
    const claims = await h.sql<{ at: Date; run_at: string }[]>`
      select at, detail->>'runAt' as run_at from worker.job_history where job_id = ${id!} and kind = 'claimed' order by id`;
    expect(claims).toHaveLength(4);
    // each later step was claimed at or after its delay, and not a tick's minute later
    for (let i = 1; i < claims.length; i++) {
      const gap = claims[i]!.at.getTime() - claims[i - 1]!.at.getTime();
      expect(gap).toBeGreaterThanOrEqual(690);
      expect(gap).toBeLessThan(5_000);
    }
  });

  it('an enqueue over HTTP with a future runAt wakes the dispatcher for that time', async () => {
    const h = createClockHarness('http-later');
    const runAt = new Date(Date.now() + 1_500);
    const res = await h.request('/v1/jobs', { method: 'POST', json: { type: 'uppercase', payload: { text: 'later' }, runAt: runAt.toISOString(), pool: h.pool } });
    expect(res.status).toBe(201);
    const { job } = (await res.json()) as { job: { id: string } };
    const row = await h.waitFor(async () => {
      const [r] = await h.sql`select status, started_at, run_at from worker.jobs where id = ${job.id}`;
      return r?.status === 'done' ? r : null;
    }, 15_000);
    expect(row.started_at.getTime()).toBeGreaterThanOrEqual(row.run_at.getTime());
    expect(row.started_at.getTime() - row.run_at.getTime()).toBeLessThan(5_000);
  });

  it('an enqueue its own kick drains wakes nobody: the request finds nothing waiting and calls no dispatcher', async () => {
    const h = createClockHarness('kicked');
    const res = await h.request('/v1/jobs', { method: 'POST', json: { type: 'uppercase', payload: { text: 'now' }, pool: h.pool } });
    const { job } = (await res.json()) as { job: { id: string } };
    const [row] = await h.sql`select status, locked_by from worker.jobs where id = ${job.id}`;
    expect(row).toMatchObject({ status: 'done' });
    expect(row!.locked_by.split(':')[1]).toBe('request');
    const [shard0] = await h.statuses();
    expect(shard0).toMatchObject({ alarms: 0, alarmAt: null });
  });

  it('a duplicate or later wake-up changes nothing: the earliest alarm stays, and each job runs once', async () => {
    const h = createClockHarness('duplicate');
    const at = Date.now() + 3_000;
    // 20 concurrent wake-ups, half of them for later: the alarm ends at the earliest, whatever the order
    await Promise.all(Array.from({ length: 20 }, (_, i) => wakeDispatcher(h.env, { pool: h.pool, shard: 0, at: at + (i % 2) * 5_000 })));
    expect((await h.statuses())[0]!.alarmAt).toBe(new Date(at).toISOString());
    expect(await wakeDispatcher(h.env, { pool: h.pool, shard: 0, at: at + 60_000 })).toBe(at); // a later one: unchanged
    expect(await wakeDispatcher(h.env, { pool: h.pool, shard: 0, at })).toBe(at); // the same again: unchanged
    const ids = await h.insert(Array.from({ length: 30 }, (_, i) => ({ type: 'uppercase', payload: { text: `d${i}` } })));
    // and a burst of immediate wake-ups on top: alarms may overlap, claims are fenced
    await Promise.all(Array.from({ length: 10 }, () => wakeDispatcher(h.env, { pool: h.pool, shard: 0, at: Date.now() })));
    await h.waitFor(async () => {
      const [r] = await h.sql`select count(*)::int as n from worker.jobs where id = any(${ids}::uuid[]) and status = 'done'`;
      return r!.n === ids.length;
    }, 15_000);
    const [claims] = await h.sql`select count(*)::int as n, count(distinct job_id)::int as jobs from worker.job_history where job_id = any(${ids}::uuid[]) and kind = 'claimed'`;
    expect(claims).toEqual({ n: 30, jobs: 30 });
  });

  it('a lost alarm is re-armed by the tick', async () => {
    const h = createClockHarness('lost');
    await wakeDispatcher(h.env, { pool: h.pool, shard: 0, at: Date.now() + 600_000 });
    await disarmDispatcher(h.env, h.pool, 0);
    expect((await h.statuses())[0]!.alarmAt).toBeNull();
    // due after the tick's own drain has returned: only a re-armed alarm can start it
    const [id] = await h.insert([{ type: 'uppercase', payload: { text: 'after-loss' }, runAt: new Date(Date.now() + 4_000) }]);
    await h.tick();
    const row = await h.waitFor(async () => {
      const [r] = await h.sql`select status, locked_by from worker.jobs where id = ${id!}`;
      return r?.status === 'done' ? r : null;
    }, 20_000);
    expect(row.locked_by.split(':')[1]).toBe('dispatcher-0'); // run by the re-armed clock, not by the tick
  });

  it('a burst fans out to more shards, and no step ever has two owners', async () => {
    const h = createClockHarness('fan-out');
    const ids = await h.insert(Array.from({ length: 400 }, (_, i) => ({ type: 'countdown', payload: { n: 2 } , priority: i })) as never);
    await wakeDispatcher(h.env, { pool: h.pool, shard: 0, at: Date.now() });
    await h.waitFor(async () => {
      const [r] = await h.sql`select count(*)::int as n from worker.jobs where id = any(${ids}::uuid[]) and status = 'done'`;
      return r!.n === ids.length;
    }, 45_000);
    // 3 steps per job, each claimed once: a duplicate claim of a step would show as a 4th claim
    const [claims] = await h.sql`
      select count(*)::int as n, count(distinct (job_id, detail->>'step'))::int as steps
        from worker.job_history where job_id = any(${ids}::uuid[]) and kind = 'claimed'`;
    expect(claims!.n).toBe(1_200);
    const statuses = await h.statuses();
    const drained = statuses.filter((s) => s.claimed > 0);
    expect(drained.length).toBeGreaterThan(1); // shards other than 0 took part
    // and their invocations were the owners of record (locked_by is <pool>:<role>:<id>)
    const roles = await h.sql<{ role: string }[]>`select distinct split_part(locked_by, ':', 2) as role from worker.jobs where id = any(${ids}::uuid[]) order by 1`;
    expect(roles.length).toBeGreaterThan(1);
    expect(roles.every((r) => /^dispatcher-[0-3]$/.test(r.role))).toBe(true);
  });
});
