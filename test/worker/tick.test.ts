// Postgres matrix: the tick's drain over parked rows: 15 and 16 refuse 'infinity' - now().
import { beforeAll, describe, expect, it } from 'vitest';
import { countJobs, createWorkerHarness, type WorkerHarness } from './support.ts';

let h: WorkerHarness;
beforeAll(async () => {
  h = await createWorkerHarness();
});

const TICK = '* * * * *';
const BILLING = '0 0 1 * *';
const CLEANUP = '*/15 * * * *';

async function clear() {
  await h.sql`update worker.jobs set status = 'cancelled', finished_at = now() where status in ('queued', 'running')`;
}

describe('the tick', () => {
  it('drains due jobs', async () => {
    await clear();
    await h.sql`select worker.enqueue_jobs(${h.sql.json(Array.from({ length: 20 }, (_, i) => ({ type: 'countdown', payload: { n: 2 } , priority: i })))}::jsonb)`;
    await h.trigger(TICK);
    expect(await countJobs(h.sql, h.sql`type = 'countdown' and status = 'done'`)).toBe(20);
  });

  it('five overlapping ticks over 500 jobs run each job exactly once', async () => {
    await clear();
    await h.sql`select worker.enqueue_jobs(${h.sql.json(Array.from({ length: 500 }, (_, i) => ({ type: 'uppercase', payload: { text: `t${i}` } })))}::jsonb)`;
    await Promise.all(Array.from({ length: 5 }, () => h.trigger(TICK)));
    const [row] = await h.sql`
      select count(*)::int as jobs,
             count(*) filter (where status = 'done')::int as done,
             (select count(*)::int from worker.job_history e join worker.jobs j on j.id = e.job_id
               where e.kind = 'claimed' and j.payload->>'text' like 't%') as claims,
             (select count(distinct locked_by)::int from worker.jobs where payload->>'text' like 't%') as owners
        from worker.jobs where payload->>'text' like 't%'`;
    expect(row).toMatchObject({ jobs: 500, done: 500, claims: 500 });
    expect(row!.owners).toBeGreaterThan(1);
  });

  it('a follower tick does no maintenance; the leader tick does', async () => {
    await clear();
    // earlier ticks ran at the real time, which may itself be just after a month-end slot
    await h.sql`delete from worker.schedule_runs`;
    await h.sql`delete from worker.jobs where type = 'billing_cron'`;
    await h.sql`update worker.leader_lease set holder = 'another-pool', acquired_at = now(), expires_at = now() + interval '5 minutes'`;
    await h.trigger(TICK, new Date('2026-12-01T00:05:00Z'));
    expect(await countJobs(h.sql, h.sql`type = 'billing_cron'`)).toBe(0); // no backfill from a follower
    const [lease] = await h.sql`select holder from worker.leader_lease`;
    expect(lease!.holder).toBe('another-pool');

    await h.sql`update worker.leader_lease set expires_at = now() - interval '1 second'`;
    await h.trigger(TICK, new Date('2026-12-01T00:05:00Z'));
    const [after] = await h.sql`select holder, generation from worker.leader_lease`;
    expect(after!.holder).toBe('default');
    // the leader backfilled the month-end slot it missed, and the tick ran it
    const billing = await h.sql`select submit_key, payload, started_at from worker.jobs where type = 'billing_cron'`;
    expect(billing).toHaveLength(1);
    expect(billing[0]).toMatchObject({ submit_key: 'billing_cron:2026-11', payload: { period: '2026-11' } });
    expect(billing[0]!.started_at).not.toBeNull(); // and the same tick's drain ran it
  });
});

describe('the drain', () => {
  it('ends when the only queued jobs are parked (run_at infinity), on every supported Postgres', async () => {
    await clear();
    await h.sql`select worker.enqueue_jobs(${h.sql.json([{ type: 'countdown', payload: { n: 1 } }])}::jsonb)`;
    // parked as a step that returns no delay leaves it: queued until resumed
    await h.sql`update worker.jobs set run_at = 'infinity', step = 'parked' where status = 'queued' and type = 'countdown'`;
    // Postgres 15 and 16 refuse 'infinity' - now() ("cannot subtract infinite timestamps")
    await h.trigger(TICK, new Date(), { TICK_BUDGET_MS: '2000' });
    const parked = await h.sql`select status, run_at = 'infinity' as parked from worker.jobs where type = 'countdown' and step = 'parked'`;
    expect(parked).toEqual([{ status: 'queued', parked: true }]);
  });
});

describe('job types the Worker does not run', () => {
  it('stay queued through a tick: the drain claims only the types in its registry', async () => {
    await clear();
    await h.sql`insert into worker.job_types (type) values ('node_only_type') on conflict do nothing`;
    const [row] = await h.sql`select id from worker.enqueue_job(type => 'node_only_type', payload => '{}'::jsonb)`;
    await h.sql`select worker.enqueue_jobs(${h.sql.json([{ type: 'uppercase', payload: { text: 'mine' } }])}::jsonb)`;
    await h.trigger(TICK, new Date(), { TICK_BUDGET_MS: '1000' });
    const [job] = await h.sql`select status, attempts, started_at from worker.jobs where id = ${row!.id}`;
    expect(job).toEqual({ status: 'queued', attempts: 0, started_at: null });
    expect(await h.sql`select 1 from worker.alerts where job_id = ${row!.id}`).toEqual([]);
    expect(await countJobs(h.sql, h.sql`type = 'uppercase' and payload->>'text' = 'mine' and status = 'done'`)).toBe(1);
    await h.sql`delete from worker.jobs where id = ${row!.id}`;
  });
});

describe('cron slots', () => {
  it('a duplicate or overlapping trigger of one slot makes one job', async () => {
    await clear();
    const slot = new Date('2027-01-01T00:00:00Z');
    await Promise.all([h.trigger(BILLING, slot), h.trigger(BILLING, slot), h.trigger(BILLING, slot)]);
    await h.trigger(BILLING, slot);
    const jobs = await h.sql`select submit_key, started_at is not null as ran from worker.jobs where type = 'billing_cron' and submit_key = 'billing_cron:2026-12'`;
    expect(jobs).toEqual([{ submit_key: 'billing_cron:2026-12', ran: true }]);
    const runs = await h.sql`select slot_at from worker.schedule_runs where schedule = 'billing_cron' and slot_at = ${slot}`;
    expect(runs).toHaveLength(1);
  });

  it('each cleanup slot gets its own job, once', async () => {
    const t = new Date('2027-01-01T10:15:00Z');
    await h.trigger(CLEANUP, t);
    await h.trigger(CLEANUP, t);
    await h.trigger(CLEANUP, new Date('2027-01-01T10:30:00Z'));
    const keys = await h.sql`select submit_key from worker.jobs where type = 'cleanup' and submit_key like 'cleanup:2027-01-01T10:%' order by 1`;
    expect(keys.map((k) => k.submit_key)).toEqual(['cleanup:2027-01-01T10:15Z', 'cleanup:2027-01-01T10:30Z']);
  });

  it('a missed slot is backfilled by the tick within the window, not outside it', async () => {
    await h.sql`update worker.leader_lease set expires_at = now() - interval '1 second'`;
    // the 2027-02-01 trigger never came; a tick 20 minutes later backfills it
    await h.trigger(TICK, new Date('2027-02-01T00:20:00Z'));
    expect(await countJobs(h.sql, h.sql`submit_key = 'billing_cron:2027-01'`)).toBe(1);
    // two days after the 2027-03-01 slot, with a one-day window: not backfilled
    await h.trigger(TICK, new Date('2027-03-03T00:00:00Z'));
    expect(await countJobs(h.sql, h.sql`submit_key = 'billing_cron:2027-02'`)).toBe(0);
  });

  it('a schedule whose slot has not succeeded within its grace raises one schedule_missed alert, resolved on success', async () => {
    await h.sql`update worker.schedules set created_at = '2027-01-01', last_success_slot_at = '2027-03-01'`;
    const noBackfill = { CRON_BACKFILL_MS: '0', SCHEDULE_GRACE_MS: '3600000' };
    await h.trigger(TICK, new Date('2027-04-01T00:30:00Z'), noBackfill);
    expect(await h.sql`select key from worker.alerts where kind = 'schedule_missed' and key = 'billing_cron' and resolved_at is null`).toEqual([]);
    await h.trigger(TICK, new Date('2027-04-01T01:30:00Z'), noBackfill);
    await h.trigger(TICK, new Date('2027-04-01T01:31:00Z'), noBackfill);
    const open = await h.sql`select key, occurrences from worker.alerts where kind = 'schedule_missed' and resolved_at is null`;
    expect(open.map((a) => a.key)).toContain('billing_cron');
    expect(open.find((a) => a.key === 'billing_cron')!.occurrences).toBe(2);
    await h.trigger(BILLING, new Date('2027-04-01T00:00:00Z'));
    // the slot's job succeeds (billing itself is tested with its own fixtures; the real clock is
    // still in the month being billed, so here the run is marked done directly)
    await h.sql`update worker.jobs set status = 'done', result = '{}', finished_at = now(), locked_until = null
                 where submit_key = 'billing_cron:2027-03'`;
    await h.trigger(TICK, new Date('2027-04-01T01:32:00Z'), noBackfill);
    expect(await h.sql`select key from worker.alerts where kind = 'schedule_missed' and key = 'billing_cron' and resolved_at is null`).toEqual([]);
  });
});

describe('the kick', () => {
  it('an accepted enqueue starts the job without a tick', async () => {
    await clear();
    const res = await h.request('/v1/jobs', { method: 'POST', json: { type: 'countdown', payload: { n: 3 } } });
    expect(res.status).toBe(201);
    const { job } = (await res.json()) as { job: { id: string } };
    const [row] = await h.sql`select status, result from worker.jobs where id = ${job.id}`;
    expect(row).toEqual({ status: 'done', result: { steps: 3 } });
  });
});
