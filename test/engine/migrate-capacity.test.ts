// Postgres matrix: migrations from the previous release.
import { describe, expect, it } from 'vitest';
import type { Sql } from '../../queue/db.ts';
import { claimJobs, completeJob, enqueue, getJob, rescueExpiredLeases } from '../../queue/index.ts';
import { migrate } from '../../queue/migrate.ts';
import { emptyDatabase, previousRelease } from '../support/previous-release.ts';

/**
 * 0170 on a database the release before it configured and filled: the weight classes change cost
 * and rank in place, every pool's max_running_weight moves from the old units (light 1, heavy 2)
 * to GB as the old peak (8 per heavy that fit, 3 for an odd unit), and the jobs running and
 * queued across the migration go on under the new limits.
 */

const T0 = new Date('2031-09-01T10:00:00Z');
const at = (ms: number) => new Date(T0.getTime() + ms);

describe('0170 on a database the release before it filled', () => {
  it('moves the classes and every pool\'s capacity to GB, and the jobs running across it go on within the new limits', async () => {
    const sql = await emptyDatabase('sbt_migcap');
    await migrate(sql, previousRelease('0170'));
    await sql`insert into worker.job_types (type, lease_ms, max_attempts) values ('mig_cap', 120000, 5)`;
    await sql`insert into worker.pool_capacity (pool, enabled, max_running_weight) values
                ('zero', true, 0), ('one', true, 1), ('two', true, 2), ('three', true, 3), ('seven', false, 7), ('ten', true, 10)`;
    // pool three full in the old units: one heavy (2) and one light (1) running; a heavy and a light queued
    const job = async (pool: string | undefined, weight: string, text: string) =>
      (await enqueue(sql, { type: 'mig_cap', payload: { text }, pool, weight }, { now: T0 })).job;
    const heavy = await job('three', 'heavy', 'h1');
    const light = await job('three', 'light', 'l1');
    const running = await claimJobs(sql, { workerId: 'old', pool: 'three', limit: 10, now: at(1000) });
    expect(running.map((j) => j.id).sort()).toEqual([heavy.id, light.id].sort());
    const queuedHeavy = await job('three', 'heavy', 'h2');
    const queuedLight = await job('three', 'light', 'l2');
    const inTwo = await job('two', 'heavy', 'h3');
    const crashing = await job(undefined, 'light', 'crash');
    const [crashed] = await claimJobs(sql, { workerId: 'old', pool: null, limit: 1, now: at(2000), types: ['mig_cap'] });
    expect(crashed!.id).toBe(crashing.id);

    const applied = await migrate(sql);
    expect(applied).toContain('0170_capacity_model.sql');

    expect((await sql`select name, rank, cost, escalates_to from worker.weight_classes order by rank`).map((r) => ({ ...r }))).toEqual([
      { name: 'light', rank: 1, cost: 3, escalates_to: 'heavy' },
      { name: 'playwright', rank: 2, cost: 6, escalates_to: 'heavy' },
      { name: 'heavy', rank: 3, cost: 8, escalates_to: null },
    ]);
    const pools = await sql`select pool, enabled, max_running_weight, max_weight from worker.pool_capacity order by max_running_weight`;
    expect(pools.map((r) => [r.pool, r.enabled, r.max_running_weight, r.max_weight])).toEqual([
      ['zero', true, 0, null], ['one', true, 3, null], ['two', true, 8, null], ['three', true, 11, null], ['seven', false, 27, null], ['ten', true, 40, null],
    ]);
    expect(await sql`select * from worker.pool_capacity_windows`).toHaveLength(0);

    // pool three still runs what it ran (8 + 3 = 11, its new limit): no room, until the light one ends
    expect(await claimJobs(sql, { workerId: 'new', pool: 'three', limit: 10, now: at(3000) })).toHaveLength(0);
    expect(await completeJob(sql, running.find((j) => j.id === light.id)!, null, { now: at(4000) })).toBe(true);
    const next = await claimJobs(sql, { workerId: 'new', pool: 'three', limit: 10, now: at(5000) });
    expect(next.map((j) => j.id)).toEqual([queuedLight.id]); // 3 fits, the queued heavy (8) does not yet
    expect((await getJob(sql, queuedHeavy.id))!.job.status).toBe('queued');
    // a heavy job queued in pool two (old 2, one heavy) is still claimable there (new 8)
    expect((await claimJobs(sql, { workerId: 'new', pool: 'two', limit: 10, now: at(6000) })).map((j) => j.id)).toEqual([inTwo.id]);
    // a pool of one (old: one light job) still takes a light job and refuses a pinned heavy one
    await expect(enqueue(sql, { type: 'mig_cap', payload: {}, pool: 'one', weight: 'heavy' })).rejects.toMatchObject({ field: 'weight' });
    expect((await enqueue(sql, { type: 'mig_cap', payload: {}, pool: 'one' })).job.weight).toBe('light');

    // the job claimed before the migration and crashed escalates by the new targets
    expect(await rescueExpiredLeases(sql, { now: at(2000 + 120_001) })).toMatchObject({ requeued: 1 });
    const after = (await getJob(sql, crashed!.id))!;
    expect(after.job).toMatchObject({ status: 'queued', weight: 'heavy' });
    expect(after.events.find((e) => e.kind === 'escalated')!.detail).toEqual({ from: 'light', to: 'heavy' });
  });
});
