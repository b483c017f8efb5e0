import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { claimJobs, enqueue } from '../../queue/index.ts';
import { openInvocation, type Invocation } from '../../functions/invocation.ts';
import type { Schedule } from '../../functions/schedules.ts';
import { MAINTENANCE_FAILED, MAINTENANCE_PASSES, runTick } from '../../functions/tick.ts';
import { createWorkerHarness, TOKENS, type WorkerHarness } from './support.ts';

/**
 * The leader's maintenance passes are isolated from each other and from the drain: a pass that
 * throws for real (here the database refuses its statement) is logged and alerted, scrubbed of
 * the env's secrets, and every other pass and the drain still run in the same tick.
 */
let h: WorkerHarness;
beforeAll(async () => {
  h = await createWorkerHarness({ TICK_BUDGET_MS: '1000' } as never);
});

const HOUR = 3_600_000;
const NOW = new Date('2027-06-01T00:05:00Z');
const every15: Schedule = {
  name: 'maint_test', cron: '*/15 * * * *', type: 'uppercase',
  slotKey: (slot) => `maint_test:${slot.toISOString()}`, payload: () => ({ text: 'slot' }),
};
const broken = (cron: string, name = 'maint_broken'): Schedule => ({ name, cron, type: 'uppercase', slotKey: () => name, payload: () => ({ text: 'x' }) });

async function withInvocation<T>(run: (inv: Invocation) => Promise<T>): Promise<T> {
  const inv = await openInvocation(h.env);
  try {
    return await run(inv);
  } finally {
    await inv.close();
  }
}

async function arrange() {
  await h.sql`update worker.jobs set status = 'cancelled', finished_at = now(), locked_until = null where status in ('queued', 'running')`;
  await h.sql`update worker.leader_lease set expires_at = now() - interval '1 second'`;
  // expired lease: the rescue requeues it (and the drain then runs it)
  const expired = (await enqueue(h.sql, { type: 'uppercase', payload: { text: 'rescue me' }, runAt: new Date(Date.now() - HOUR) })).job;
  await claimJobs(h.sql, { workerId: 'gone:1', limit: 1, now: new Date(Date.now() - HOUR) });
  // running for 3 h on a live lease: the stuck-job pass alerts
  const stuck = (await enqueue(h.sql, { type: 'countdown', payload: { n: 1 }, priority: 0, runAt: new Date(Date.now() - 3 * HOUR) })).job;
  await claimJobs(h.sql, { workerId: 'slow:1', limit: 1, now: new Date(Date.now() - 3 * HOUR) });
  await h.sql`update worker.jobs set locked_until = now() + interval '1 hour' where id = ${stuck.id}`;
  // due for an hour, of a type no runner has: the unclaimed-jobs pass alerts
  await h.sql`insert into worker.job_types (type) values ('maint_nobody_runs') on conflict do nothing`;
  const unclaimed = (await enqueue(h.sql, { type: 'maint_nobody_runs', payload: {}, runAt: new Date(Date.now() - HOUR) })).job;
  // due now: the drain runs it
  const due = (await enqueue(h.sql, { type: 'uppercase', payload: { text: 'drain me' } })).job;
  return { expired, stuck, unclaimed, due };
}

// a failed assertion must not leave the refusing triggers behind for the next test
afterEach(async () => {
  vi.restoreAllMocks();
  await h.sql`drop trigger if exists refuse_prune on worker.job_events`;
  await h.sql`drop function if exists public.refuse_prune()`;
  await h.sql`drop trigger if exists refuse_schedules on worker.schedules`;
  await h.sql`drop function if exists public.refuse_schedules()`;
});

describe('a maintenance pass that throws', () => {
  it('is logged and alerted, scrubbed, and the other passes and the drain still run', async () => {
    const { expired, stuck, unclaimed, due } = await arrange();
    // The prune pass fails for real: the database refuses its delete, with an error that quotes a secret.
    await h.sql.unsafe(`
      create function public.refuse_prune() returns trigger language plpgsql as $$
      begin raise exception 'event prune refused (token ${TOKENS.admin})'; end $$`);
    await h.sql`create trigger refuse_prune before delete on worker.job_events for each statement execute function public.refuse_prune()`;
    const lines: string[] = [];
    vi.spyOn(console, 'log').mockImplementation((line: unknown) => void lines.push(String(line)));
    vi.spyOn(console, 'error').mockImplementation((line: unknown) => void lines.push(String(line)));

    const result = await withInvocation((inv) => runTick(inv, NOW, { schedules: [every15, broken('61 * * * *')] }));

    expect(result.leader.isLeader).toBe(true);
    expect(result.failed).toEqual(['pruned']);
    expect(result.maintenance!.pruned).toEqual({ error: expect.stringContaining('event prune refused') });
    // every other pass ran
    expect(Object.keys(result.maintenance!).sort()).toEqual([...MAINTENANCE_PASSES].sort());
    expect(result.maintenance!.rescued).toMatchObject({ requeued: 1 });
    expect(result.maintenance!.backfilled).toEqual(['maint_test:2027-06-01T00:00:00.000Z']);
    expect(result.maintenance!.schedules).toMatchObject({ invalid: ['maint_broken'] });
    expect(result.maintenance!.stuck).toMatchObject({ opened: 1 });
    expect(result.maintenance!.unclaimed).toMatchObject({ opened: 1 });
    expect(await h.sql`select key from worker.alerts where kind = 'unclaimed_jobs' and job_id = ${unclaimed.id} and resolved_at is null`)
      .toEqual([{ key: 'maint_nobody_runs' }]);
    expect(result.maintenance!.leaderChurn).not.toHaveProperty('error');
    expect(result.maintenance!.eventsRolledUp).not.toHaveProperty('error');
    expect(await h.sql`select 1 from worker.depth_snapshots where at = date_trunc('minute', ${NOW}::timestamptz)`).toHaveLength(1);
    expect(await h.sql`select key from worker.alerts where kind = 'stuck_job' and job_id = ${stuck.id} and resolved_at is null`).toHaveLength(1);
    // and the drain ran: the due job and the rescued one are done
    const done = await h.sql`select id from worker.jobs where id in (${due.id}, ${expired.id}) and status = 'done'`;
    expect(done).toHaveLength(2);

    // the failure: one alert keyed by the pass, delivered this tick, its text scrubbed
    const [alert] = await h.sql`select key, message, detail, notified_at from worker.alerts where kind = ${MAINTENANCE_FAILED} and resolved_at is null`;
    expect(alert).toMatchObject({ key: 'pruned', detail: { pass: 'pruned', code: 'P0001' } });
    expect(alert!.message).toBe('maintenance pass pruned failed: event prune refused (token [redacted])');
    expect(alert!.notified_at).not.toBeNull();
    const logged = lines.join('\n');
    expect(logged).toContain('maintenance pass failed');
    expect(logged).not.toContain(TOKENS.admin);

    // a second failing tick is the same alert, seen again; a tick where the pass succeeds resolves it
    await withInvocation((inv) => runTick(inv, new Date(NOW.getTime() + 60_000), { schedules: [every15] }));
    expect(await h.sql`select occurrences from worker.alerts where kind = ${MAINTENANCE_FAILED} and resolved_at is null`).toEqual([{ occurrences: 2 }]);
    await h.sql`drop trigger refuse_prune on worker.job_events`;
    const healed = await withInvocation((inv) => runTick(inv, new Date(NOW.getTime() + 120_000), { schedules: [every15] }));
    expect(healed.failed).toEqual([]);
    expect(await h.sql`select 1 from worker.alerts where kind = ${MAINTENANCE_FAILED} and resolved_at is null`).toEqual([]);
  });

  it('a failing first pass does not stop the scheduled handler from draining', async () => {
    const { due } = await arrange();
    // syncSchedules, the first pass, fails: the database refuses writes to worker.schedules
    await h.sql`
      create function public.refuse_schedules() returns trigger language plpgsql as $$
      begin raise exception 'schedules are read-only'; end $$`;
    await h.sql`create trigger refuse_schedules before insert or update on worker.schedules for each statement execute function public.refuse_schedules()`;
    await h.trigger('* * * * *', NOW);
    expect(await h.sql`select status from worker.jobs where id = ${due.id}`).toEqual([{ status: 'done' }]);
    const open = await h.sql`select key from worker.alerts where kind = ${MAINTENANCE_FAILED} and resolved_at is null order by key`;
    // the backfill and the dead-man check write worker.schedules too, so they fail with it; nothing else does
    expect(open.map((a) => a.key)).toEqual(['backfilled', 'schedules', 'syncSchedules']);
    expect(await h.sql`select 1 from worker.depth_snapshots where at = date_trunc('minute', ${NOW}::timestamptz)`).toHaveLength(1);
  });
});

describe('schedule_invalid', () => {
  it('opens for a spec that does not parse and is resolved by the first tick that finds it fixed', async () => {
    await arrange();
    await withInvocation((inv) => runTick(inv, NOW, { schedules: [every15, broken('61 * * * *', 'fix_me')] }));
    const [open] = await h.sql`select key, detail from worker.alerts where kind = 'schedule_invalid' and key = 'fix_me' and resolved_at is null`;
    expect(open).toEqual({ key: 'fix_me', detail: { cron: '61 * * * *' } });

    const later = new Date(NOW.getTime() + 60_000);
    const fixed = await withInvocation((inv) => runTick(inv, later, { schedules: [every15, broken('0 * * * *', 'fix_me')] }));
    expect(fixed.maintenance!.schedules).toMatchObject({ invalid: [] });
    const rows = await h.sql`select resolved_at from worker.alerts where kind = 'schedule_invalid' and key = 'fix_me'`;
    expect(rows).toEqual([{ resolved_at: later }]);
  });
});
