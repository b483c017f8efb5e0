// Postgres matrix: deadlines.
import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  alertMissedDeadlines, cancelJob, claimJobs, completeJob, defineJobType, done, enqueue, enqueueBatch, failJobPermanently,
  JobRegistry, pastDeadlineJobs, requeueJob, sampleJobTypes, ValidationError,
} from '../../queue/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { expectSqlRefusal } from '../support/refusals.ts';

let db: TestDatabase;
const T0 = new Date('2026-11-01T00:00:00Z');
const HOUR = 3_600_000;
const at = (ms: number) => new Date(T0.getTime() + ms);

/** A type with the manual's infra deadline (4 h, the P1 severity), and one without any. */
const infra = defineJobType({ type: 'dl_infra', payload: z.object({ n: z.number().optional() }), deadlineMs: 4 * HOUR, deadlineSeverity: 'critical', run: async () => done() });
const plain = defineJobType({ type: 'dl_plain', payload: z.object({}), run: async () => done() });
const lenient = defineJobType({ type: 'dl_lenient', payload: z.object({}), deadlineMs: HOUR, run: async () => done() });

beforeAll(async () => {
  db = await createTestDatabase();
  await new JobRegistry([...sampleJobTypes, infra, plain, lenient]).sync(db.sql);
});

const refused = (act: () => Promise<unknown>, column: string, message: RegExp) => expectSqlRefusal(db.sql, act, column, message);
const alertsOf = (jobId: string) =>
  db.sql`select severity, resolved_at, detail, message from worker.alerts where kind = 'deadline_missed' and key = ${jobId} order by id`;

describe('a deadline declared by the type or the job', () => {
  it('stores the type deadline on the job row at enqueue, from every path (single, batch, the plain batch, SQL)', async () => {
    const single = (await enqueue(db.sql, { type: 'dl_infra', payload: {} }, { now: at(0) })).job;
    expect(single.deadlineAt).toEqual(at(4 * HOUR));
    expect(single.deadlineSeverity).toBe('critical');
    // the plain batch (type and payload only) takes the set-wise path: the type's deadline there too
    const [plainBatch, withKey] = await enqueueBatch(db.sql, [{ type: 'dl_infra', payload: { n: 1 } }, { type: 'dl_lenient', payload: {} }], { now: at(0) });
    expect(plainBatch!.job).toMatchObject({ deadlineAt: at(4 * HOUR), deadlineSeverity: 'critical' });
    expect(withKey!.job).toMatchObject({ deadlineAt: at(HOUR), deadlineSeverity: 'warning' });
    const [keyed] = await enqueueBatch(db.sql, [{ type: 'dl_infra', payload: {}, dedupeKey: 'dl:keyed' }], { now: at(0) });
    expect(keyed!.job.deadlineAt).toEqual(at(4 * HOUR));
    const [fromSql] = await db.sql`select created_at, deadline_at, deadline_severity from worker.enqueue_job(type => 'dl_infra', payload => '{}')`;
    expect((fromSql!.deadline_at as Date).getTime() - (fromSql!.created_at as Date).getTime()).toBe(4 * HOUR);
    expect(fromSql!.deadline_severity).toBe('critical');
    // a type without a deadline gives none
    expect((await enqueue(db.sql, { type: 'dl_plain', payload: {} })).job).toMatchObject({ deadlineAt: null, deadlineSeverity: null });
  });

  it("lets a job's own deadlineMs and deadlineSeverity override its type's, each on its own", async () => {
    const ms = (await enqueue(db.sql, { type: 'dl_infra', payload: {}, deadlineMs: HOUR }, { now: at(0) })).job;
    expect(ms).toMatchObject({ deadlineAt: at(HOUR), deadlineSeverity: 'critical' });
    const severity = (await enqueue(db.sql, { type: 'dl_infra', payload: {}, deadlineSeverity: 'warning' }, { now: at(0) })).job;
    expect(severity).toMatchObject({ deadlineAt: at(4 * HOUR), deadlineSeverity: 'warning' });
    const own = (await enqueue(db.sql, { type: 'dl_plain', payload: {}, deadlineMs: 90_000 }, { now: at(0) })).job;
    expect(own).toMatchObject({ deadlineAt: at(90_000), deadlineSeverity: 'warning' });
    const [batched] = await enqueueBatch(db.sql, [{ type: 'dl_plain', payload: {}, deadlineMs: 60_000, deadlineSeverity: 'critical' }], { now: at(0) });
    expect(batched!.job).toMatchObject({ deadlineAt: at(60_000), deadlineSeverity: 'critical' });
    const [sqlJob] = await db.sql`select deadline_at, deadline_severity from worker.enqueue_jobs(${db.sql.json([{ type: 'dl_infra', payload: {}, deadlineMs: 1000 }])}, ${at(0)}) j,
                                  jsonb_populate_record(null::worker.jobs, j) r`;
    expect(sqlJob).toEqual({ deadline_at: at(1000), deadline_severity: 'critical' });
    // the deadline counts from enqueue, a delayed start included
    const delayed = (await enqueue(db.sql, { type: 'dl_plain', payload: {}, delayMs: HOUR, deadlineMs: 2 * HOUR }, { now: at(0) })).job;
    expect(delayed.deadlineAt).toEqual(at(2 * HOUR));
  });

  it('makes a different deadline a different request for a submit key, and the same one the same', async () => {
    const first = await enqueue(db.sql, { type: 'dl_plain', payload: {}, submitKey: 'dl:submit', deadlineMs: 60_000 });
    const again = await enqueue(db.sql, { type: 'dl_plain', payload: {}, submitKey: 'dl:submit', deadlineMs: 60_000 });
    expect(again).toMatchObject({ duplicate: true, job: { id: first.job.id } });
    await expect(enqueue(db.sql, { type: 'dl_plain', payload: {}, submitKey: 'dl:submit', deadlineMs: 120_000 })).rejects.toThrow(/already used for a different request/);
  });
});

describe('a bad deadline', () => {
  const cases: [string, Record<string, unknown>, string, RegExp][] = [
    ['zero', { deadlineMs: 0 }, 'deadlineMs', /^deadlineMs must be an integer from 1 to 2592000000 \(30 days\), got 0$/],
    ['negative', { deadlineMs: -5 }, 'deadlineMs', /deadlineMs must be an integer from 1 to 2592000000/],
    ['past 30 days', { deadlineMs: 2_592_000_001 }, 'deadlineMs', /deadlineMs must be an integer from 1 to 2592000000 \(30 days\), got 2592000001/],
    ['an unknown severity', { deadlineMs: 1000, deadlineSeverity: 'p1' }, 'deadlineSeverity', /^deadlineSeverity must be 'warning' or 'critical', got "p1"$/],
    ['a severity without a deadline', { deadlineSeverity: 'critical' }, 'deadlineSeverity', /deadlineSeverity needs a deadline: give deadlineMs \(job type "dl_plain" declares none\)/],
  ];

  it.each(cases)('(%s) is refused by SQL enqueue_job and enqueue_jobs, naming the field, writing nothing', async (_, fields, column, message) => {
    const ms = (fields.deadlineMs as number | undefined) ?? null;
    const severity = (fields.deadlineSeverity as string | undefined) ?? null;
    await refused(() => db.sql`select * from worker.enqueue_job(type => 'dl_plain', deadline_ms => ${ms}::bigint, deadline_severity => ${severity}::text)`, column, message);
    // an element with a deadline leaves the plain batch: the element path names it
    const batch = [{ type: 'dl_plain', payload: {} }, { type: 'dl_plain', payload: {}, ...fields }];
    await refused(() => db.sql`select * from worker.enqueue_jobs(${db.sql.json(batch)})`, `jobs[1].${column}`, new RegExp(`^jobs\\[1\\]: ${message.source.replace(/^\^/, '')}`));
  });

  it('is refused by TypeScript enqueue and enqueueBatch as a ValidationError naming the field', async () => {
    const error = await enqueue(db.sql, { type: 'dl_plain', payload: {}, deadlineMs: 0 }).catch((e) => e);
    expect(error).toBeInstanceOf(ValidationError);
    expect(error).toMatchObject({ field: 'deadlineMs' });
    const fractional = await enqueue(db.sql, { type: 'dl_plain', payload: {}, deadlineMs: 1.5 }).catch((e) => e);
    expect(fractional).toMatchObject({ field: 'deadlineMs', message: 'deadlineMs must be an integer number of milliseconds, got 1.5' });
    const batch = await enqueueBatch(db.sql, [{ type: 'dl_plain', payload: {} }, { type: 'dl_plain', payload: {}, deadlineSeverity: 'critical' }]).catch((e) => e);
    expect(batch).toBeInstanceOf(ValidationError);
    expect(batch).toMatchObject({ field: 'jobs[1].deadlineSeverity' });
    expect((await enqueueBatch(db.sql, [{ type: 'dl_plain', payload: {}, deadlineMs: 2.5 }]).catch((e) => e))).toMatchObject({ field: 'jobs[0].deadlineMs' });
  });

  it('is refused in a type declaration, naming the type', () => {
    expect(() => defineJobType({ type: 'dl_bad', payload: z.object({}), deadlineMs: 0, run: async () => done() })).toThrow(/job type dl_bad: deadlineMs must be an integer from 1 to 2592000000/);
    expect(() => defineJobType({ type: 'dl_bad', payload: z.object({}), deadlineSeverity: 'critical', run: async () => done() })).toThrow(/deadlineSeverity needs a deadlineMs/);
    expect(() => defineJobType({ type: 'dl_bad', payload: z.object({}), deadlineMs: 1000, deadlineSeverity: 'p1' as 'critical', run: async () => done() })).toThrow(/deadlineSeverity must be 'warning' or 'critical'/);
  });
});

describe('the deadline_missed alert', () => {
  it('opens once at the deadline and not before, with the severity, and resolves when the job is done', async () => {
    await db.sql`truncate worker.jobs, worker.alerts`;
    const { job } = await enqueue(db.sql, { type: 'dl_infra', payload: {} }, { now: at(0) });
    expect(await alertMissedDeadlines(db.sql, { now: at(4 * HOUR - 1) })).toEqual({ opened: 0, resolved: 0 });
    expect((await pastDeadlineJobs(db.sql, { now: at(4 * HOUR - 1) })).total).toBe(0);
    expect(await alertMissedDeadlines(db.sql, { now: at(4 * HOUR) })).toEqual({ opened: 1, resolved: 0 });
    expect(await alertMissedDeadlines(db.sql, { now: at(5 * HOUR) })).toEqual({ opened: 0, resolved: 0 });
    const [alert] = await alertsOf(job.id);
    expect(alert).toMatchObject({ severity: 'critical', resolved_at: null, detail: { type: 'dl_infra', severity: 'critical' } });
    expect(alert!.message).toMatch(new RegExp(`^job ${job.id} \\(dl_infra\\) missed its deadline .* still queued$`));
    const past = await pastDeadlineJobs(db.sql, { now: at(5 * HOUR) });
    expect(past).toMatchObject({ total: 1, jobs: [{ id: job.id }] });

    const [claimed] = await claimJobs(db.sql, { workerId: 'w', limit: 1, now: at(5 * HOUR) });
    expect(await alertMissedDeadlines(db.sql, { now: at(5 * HOUR) })).toEqual({ opened: 0, resolved: 0 }); // still running: still late
    await completeJob(db.sql, claimed!, null, { now: at(6 * HOUR) });
    expect(await alertMissedDeadlines(db.sql, { now: at(6 * HOUR) })).toEqual({ opened: 0, resolved: 1 });
    expect((await alertsOf(job.id))[0]!.resolved_at).toEqual(at(6 * HOUR));
    expect((await pastDeadlineJobs(db.sql, { now: at(6 * HOUR) })).total).toBe(0);
  });

  it('resolves for every way a job ends, and at once on an operator action; it never reopens for the same job', async () => {
    await db.sql`truncate worker.jobs, worker.alerts`;
    const cancelled = (await enqueue(db.sql, { type: 'dl_lenient', payload: {} }, { now: at(0) })).job;
    const failed = (await enqueue(db.sql, { type: 'dl_lenient', payload: {} }, { now: at(0) })).job;
    const oom = (await enqueue(db.sql, { type: 'dl_lenient', payload: {} }, { now: at(0) })).job;
    expect((await alertMissedDeadlines(db.sql, { now: at(HOUR) })).opened).toBe(3);
    await cancelJob(db.sql, cancelled.id, 'no longer wanted', { now: at(HOUR + 1) });
    await db.sql`update worker.jobs set status = 'oom_killed', finished_at = ${at(HOUR + 1)} where id = ${oom.id}`;
    // an operator's fail resolves its alert at once (the trigger), the others by the next pass
    await failJobPermanently(db.sql, failed.id, 'gave up', { now: at(HOUR + 2) });
    expect((await alertsOf(failed.id))[0]!.resolved_at).toEqual(at(HOUR + 2));
    expect(await alertMissedDeadlines(db.sql, { now: at(HOUR + 3) })).toEqual({ opened: 0, resolved: 2 });
    // run again by the operator, still past its deadline: the alert stays resolved, none opens
    await requeueJob(db.sql, failed.id, { now: at(HOUR + 4) });
    expect(await alertMissedDeadlines(db.sql, { now: at(2 * HOUR) })).toEqual({ opened: 0, resolved: 0 });
    expect(await alertsOf(failed.id)).toHaveLength(1);
    // an operator resolving the alert of a job still late does not bring it back either
    const late = (await enqueue(db.sql, { type: 'dl_lenient', payload: {} }, { now: at(0) })).job;
    expect((await alertMissedDeadlines(db.sql, { now: at(2 * HOUR) })).opened).toBe(1);
    await db.sql`update worker.alerts set resolved_at = ${at(2 * HOUR)} where key = ${late.id}`;
    expect((await alertMissedDeadlines(db.sql, { now: at(3 * HOUR) })).opened).toBe(0);
    expect(await alertsOf(late.id)).toHaveLength(1);
    // a job pruned away resolves its open alert too
    const pruned = (await enqueue(db.sql, { type: 'dl_lenient', payload: {} }, { now: at(0) })).job;
    expect((await alertMissedDeadlines(db.sql, { now: at(3 * HOUR) })).opened).toBe(1);
    await db.sql`delete from worker.jobs where id = ${pruned.id}`;
    expect((await alertMissedDeadlines(db.sql, { now: at(3 * HOUR) })).resolved).toBe(1);
  });

  it('opens one alert per job when maintenance passes run at once', async () => {
    await db.sql`truncate worker.jobs, worker.alerts`;
    const jobs = await enqueueBatch(db.sql, Array.from({ length: 40 }, () => ({ type: 'dl_lenient', payload: {} })), { now: at(0) });
    const clients = Array.from({ length: 4 }, () => db.client(1));
    for (let round = 0; round < 3; round++) {
      const counts = await Promise.all(clients.map((c) => alertMissedDeadlines(c, { now: at(HOUR + round) })));
      expect(counts.reduce((n, c) => n + c.opened, 0)).toBe(round === 0 ? 40 : 0);
    }
    const [row] = await db.sql`select count(*)::int as n, count(distinct key)::int as keys from worker.alerts where kind = 'deadline_missed'`;
    expect(row).toEqual({ n: 40, keys: 40 });
    expect(new Set(jobs.map((j) => j.job.id)).size).toBe(40);
  });

  it('never opens a second alert for a job whose first was opened and resolved while the pass ran', async () => {
    await db.sql`truncate worker.jobs, worker.alerts`;
    const { job } = await enqueue(db.sql, { type: 'dl_lenient', payload: {} }, { now: at(0) });
    const other = db.client(1);
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    // another pass inserts the job's alert and, before it commits, an operator's resolve lands in it
    const first = db.sql.begin(async (tx) => {
      await tx`insert into worker.alerts (kind, key, job_id, severity, message) values ('deadline_missed', ${job.id}, ${job.id}, 'warning', 'first')`;
      await held;
      await tx`update worker.alerts set resolved_at = ${at(HOUR)} where key = ${job.id}`;
    });
    const pass = alertMissedDeadlines(other, { now: at(HOUR) }); // saw no alert; its insert waits on the first one's
    // until the pass waits on that lock (no sleep: its wait is what this test is about)
    // (bounded by time, not by a count of looks: a loaded machine may take longer to connect
    // the pass's client than 500 quick looks last)
    for (const until = Date.now() + 20_000; ; ) {
      const [w] = await db.sql`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`;
      if (w!.n > 0) break;
      if (Date.now() > until) throw new Error('the pass never waited on the first alert');
      await new Promise((r) => setTimeout(r, 5));
    }
    release();
    await first;
    expect((await pass).opened).toBe(0);
    expect(await alertsOf(job.id)).toHaveLength(1);
  });

  it('finds the past-deadline jobs through jobs_deadline_idx, not a scan of every job', async () => {
    const plan = await db.sql.begin(async (tx) => {
      await tx`set local enable_seqscan = off`;
      return tx`explain (format json) select count(*) from worker.jobs
        where deadline_at <= now() and deadline_at is not null and status in ('queued', 'running')`;
    });
    expect(JSON.stringify(plan)).toContain('jobs_deadline_idx');
  });
});
