import { spawn } from 'node:child_process';
import { beforeAll, describe, expect, it } from 'vitest';
import { claimJobs, claimLeaderLease, enqueue, JobRegistry, retryJob, runSteps, sampleJobTypes, spawn as spawnStep, spawnChildren } from '../../queue/index.ts';
import { isLocalDatabase } from '../../scripts/ops.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { installFaults } from '../support/faults.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});

/** `npm run ops -- …` as a child process, against this file's database unless told otherwise. */
function ops(args: string[], databaseUrl = db.url): Promise<{ code: number | null; out: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/ops.ts', ...args], {
    env: { ...process.env, DATABASE_URL: databaseUrl },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  // 'close', not 'exit': at exit the last output can still be in the pipe
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, out })));
}

const statusOf = async (id: string) => (await db.sql`select status from worker.jobs where id = ${id}`)[0]!.status as string;

async function queuedJob(text: string): Promise<string> {
  return (await enqueue(db.sql, { type: 'uppercase', payload: { text }, delayMs: 3_600_000 })).job.id;
}

/** A job running on host-9:ops for `sinceMs`, with a live lease. */
async function runningJob(text: string, sinceMs = 0): Promise<string> {
  const id = await queuedJob(text);
  await db.sql`update worker.jobs set status = 'running', attempts = 1, locked_by = 'host-9:ops', lease_token = gen_random_uuid(),
                 started_at = now() - make_interval(secs => ${sinceMs / 1000}), claimed_at = now() - make_interval(secs => ${sinceMs / 1000}),
                 locked_until = now() + interval '2 minutes' where id = ${id}`;
  return id;
}

const MISSING = '00000000-0000-4000-8000-000000000000';

describe('npm run ops: children', () => {
  it("shows a parent's spawn and its children's outcomes, and a child's parent", async () => {
    const parent = await runningJob('parent');
    const [{ lease_token: token }] = (await db.sql`select lease_token from worker.jobs where id = ${parent}`) as unknown as [{ lease_token: string }];
    await spawnChildren(db.sql, { id: parent, leaseToken: token }, spawnStep([
      { type: 'uppercase', payload: { text: 'one' }, delayMs: 3_600_000 },
      { type: 'uppercase', payload: { text: 'two' }, delayMs: 3_600_000 },
    ], { next: 'joined', join: 2 }));
    const [first] = await db.sql`select id from worker.jobs where parent_id = ${parent} order by id limit 1`;
    await db.sql`select worker.fail_job(${first!.id}::uuid, 'gave up')`;
    const shown = await ops(['children', parent]);
    expect(shown.code).toBe(0);
    expect(shown.out).toContain('parent: none');
    expect(shown.out).toContain('spawn 1: join 2 of 2, 1 of 2 ended (2 created, 0 adopted), waiting, resumes at joined');
    expect(shown.out).toMatch(new RegExp(`${first!.id}.*uppercase.*failed.*gave up`));
    expect((await ops(['children', first!.id])).out).toContain(`parent: ${parent}`);
    expect((await ops(['children', first!.id])).out).toContain('no children: the job never spawned');
    expect(await ops(['children', MISSING])).toMatchObject({ code: 1, out: expect.stringContaining(`no job ${MISSING}`) });
  });
});

describe('npm run ops: errors', () => {
  it('lists the commands for an unknown command, and says what is missing', async () => {
    const unknown = await ops(['frobnicate']);
    expect(unknown.code).toBe(2);
    expect(unknown.out).toContain('error: unknown command "frobnicate"');
    // the commands' names, not the whole help (which pushed the error off the screen)
    for (const c of ['depth', 'lease', 'running', 'stuck', 'requeue', 'fail', 'cancel', 'release-lease', 'leader-release', 'rescue']) {
      expect(unknown.out).toMatch(new RegExp(`[ :]${c}[,\\n]`));
    }
    expect(unknown.out).not.toContain('usage:');
    // independent refusals, run side by side
    const [noId, notId, noReason, extra, flag, olderThan, missing] = await Promise.all([
      ops(['requeue']), ops(['cancel', 'job-17']), ops(['fail', MISSING]), ops(['depth', 'extra']), ops(['depth', '--colour']),
      ops(['stuck', '--older-than', 'soon']), ops(['requeue', MISSING]),
    ]);
    expect(noId).toMatchObject({ code: 2, out: expect.stringContaining('error: requeue needs a job id: npm run ops -- requeue <id>') });
    expect(notId).toMatchObject({ code: 2, out: expect.stringContaining('"job-17" is not a job id') });
    expect(noReason).toMatchObject({ code: 2, out: expect.stringContaining('fail needs a reason') });
    expect(extra).toMatchObject({ code: 2, out: expect.stringContaining('depth takes no argument') });
    expect(flag).toMatchObject({ code: 2, out: expect.stringContaining("Unknown option '--colour'") });
    expect(olderThan).toMatchObject({ code: 2, out: expect.stringContaining('--older-than must be') });
    expect(missing).toMatchObject({ code: 1, out: expect.stringContaining(`error: no job ${MISSING}`) });
    expect((await ops(['help'])).code).toBe(0);
  });

  it('refuses fail and cancel on a database that is not local unless --force, before connecting', async () => {
    const id = await queuedJob('far away');
    const remote = 'postgres://ops@db.example.com:5432/starbase';
    const fail = await ops(['fail', id, '--reason', 'nope'], remote);
    expect(fail.code).toBe(2);
    expect(fail.out).toContain('error: refusing to fail a job on db.example.com: it is not a local database');
    expect(fail.out).toContain('--force');
    expect((await ops(['cancel', id], remote)).out).toContain('refusing to cancel a job on db.example.com');
    // 0.0.0.0 is not on the local list, yet reaches this machine: --force goes through
    const viaAny = db.url.replace('127.0.0.1', '0.0.0.0');
    expect((await ops(['cancel', id], viaAny)).code).toBe(2);
    expect(await ops(['cancel', id, '--force'], viaAny)).toMatchObject({ code: 0, out: expect.stringContaining(`cancelled ${id}`) });
    expect(await statusOf(id)).toBe('cancelled');
  });

  it('tells local databases from the rest', () => {
    for (const url of ['postgres://u@127.0.0.1:5432/d', 'postgres://u@localhost/d', 'postgres://u@[::1]:5432/d', 'postgres:///d?host=/var/run/postgresql', 'postgres://%2Ftmp%2Fpg/d']) {
      expect(isLocalDatabase(url), url).toBe(true);
    }
    for (const url of ['postgres://u@db.example.com/d', 'postgres://u@10.0.0.5/d', 'postgres:///d?host=db.internal', 'postgres://u@127.0.0.1.example.com/d', 'not a url']) {
      expect(isLocalDatabase(url), url).toBe(false);
    }
  });
});

describe('npm run ops: views', () => {
  it('depth, lease, running and stuck', async () => {
    await claimLeaderLease(db.sql, 'pool-ops');
    await runningJob('slow one', 3 * 3_600_000);
    await queuedJob('waiting');
    const depth = await ops(['depth']);
    expect(depth.code).toBe(0);
    expect(depth.out).toMatch(/queued\s+uppercase\s+\d+/);
    expect((await ops(['lease'])).out).toMatch(/pool-ops\s+1\s/);
    expect((await ops(['running'])).out).toMatch(/uppercase\s+start\s+host-9:ops\s+3h0m/);
    const stuck = await ops(['stuck']);
    expect(stuck.out).toContain('stuck (running > 2h0m)');
    expect(stuck.out).toMatch(/uppercase\s+start\s+host-9:ops\s+3h0m/);
    expect((await ops(['stuck', '--older-than', String(4 * 3_600_000)])).out).toContain('(none)');
    const inspect = await ops(['inspect']);
    expect(inspect.out).toContain('queue depth');
    expect(inspect.out).toContain('leader lease');
  });
});

describe('npm run ops: operations', () => {
  it('requeue a poison job (resolving its alert), fail, cancel, release a lease, release the leader, rescue', async () => {
    const { job: poison } = await enqueue(db.sql, { type: 'fail', payload: {}, maxAttempts: 1, priority: 0 });
    const [claimed] = await claimJobs(db.sql, { workerId: 'w', limit: 1 });
    expect(claimed!.id).toBe(poison.id);
    await retryJob(db.sql, claimed!, 'boom', 0);
    expect(await ops(['requeue', poison.id])).toMatchObject({ code: 0, out: expect.stringContaining(`requeued ${poison.id} (was failed)`) });
    expect(await statusOf(poison.id)).toBe('queued');
    const [alert] = await db.sql`select resolved_at from worker.alerts where kind = 'poison_job' and job_id = ${poison.id}`;
    expect(alert!.resolved_at).toBeInstanceOf(Date);
    const again = await ops(['requeue', poison.id]);
    expect(again).toMatchObject({ code: 1, out: expect.stringContaining(`cannot requeue job ${poison.id}: it is queued`) });
    await db.sql`update worker.jobs set status = 'cancelled', finished_at = now() where id = ${poison.id}`;

    const doomed = await queuedJob('doomed');
    expect(await ops(['fail', doomed, '--reason', 'bad input upstream'])).toMatchObject({ code: 0, out: expect.stringContaining(`failed ${doomed}: bad input upstream`) });
    expect(await statusOf(doomed)).toBe('failed');

    const unwanted = await queuedJob('unwanted');
    expect((await ops(['cancel', unwanted, '--reason', 'not needed'])).out).toContain(`cancelled ${unwanted}`);
    const started = await runningJob('started');
    expect((await ops(['cancel', started])).out).toContain(`cancel requested for ${started} (running)`);

    const held = await runningJob('held');
    expect(await ops(['release-lease', held])).toMatchObject({ code: 0, out: expect.stringContaining(`released the lease of ${held} (owner host-9:ops)`) });
    expect(await statusOf(held)).toBe('queued');

    await claimLeaderLease(db.sql, 'pool-ops');
    expect((await ops(['leader-release'])).out).toContain('expired the leader lease (holder pool-ops)');
    const [lease] = await db.sql`select expires_at < now() as expired from worker.leader_lease where name = 'default'`;
    expect(lease!.expired).toBe(true);

    const crashed = await runningJob('crashed');
    await db.sql`update worker.jobs set locked_until = now() - interval '1 second' where id = ${crashed}`;
    expect((await ops(['rescue'])).out).toMatch(/rescue: requeued [1-9]\d*, failed 0, oom_killed 0/);
    expect(await statusOf(crashed)).toBe('queued');
  });
});

describe('npm run ops: pause and resume', () => {
  it('pause-type and pause-pool are shown in inspect with who and why, refused twice, and resumed', async () => {
    const paused = await ops(['pause-type', 'uppercase', '--reason', 'provider incident', '--by', 'alice']);
    expect(paused).toMatchObject({ code: 0, out: expect.stringContaining('paused type uppercase (by alice: provider incident)') });
    // a pool is defined by its capacity row or a job naming it; one nothing defines is refused
    expect(await ops(['pause-pool', 'eu-wset', '--reason', 'typo'])).toMatchObject({ code: 1, out: expect.stringContaining('unknown pool "eu-wset"') });
    await db.sql`insert into worker.pool_capacity (pool, max_running_weight) values ('eu', 0) on conflict do nothing`;
    expect(await ops(['pause-pool', 'eu', '--reason', 'maintenance'])).toMatchObject({ code: 0, out: expect.stringContaining('paused pool eu (by ops (') });
    const inspect = await ops(['inspect']);
    expect(inspect.out).toMatch(/paused\n.*\n.*pool\s+eu\s+ops \(.*maintenance/);
    expect(inspect.out).toMatch(/type\s+uppercase\s+alice\s+.*provider incident/);
    expect(inspect.out).toContain('rate limits');
    const [again, noReason, unknown] = await Promise.all([
      ops(['pause-type', 'uppercase', '--reason', 'again']), ops(['pause-type', 'uppercase']), ops(['pause-type', 'no_such_type', '--reason', 'x']),
    ]);
    expect(again).toMatchObject({ code: 1, out: expect.stringContaining('type "uppercase" is already paused (by alice') });
    expect(noReason).toMatchObject({ code: 2, out: expect.stringContaining('pause-type needs a reason') });
    expect(unknown).toMatchObject({ code: 1, out: expect.stringContaining('unknown job type "no_such_type"') });
    expect(await ops(['resume-type', 'uppercase'])).toMatchObject({ code: 0, out: expect.stringContaining('resumed type uppercase (paused by alice') });
    expect(await ops(['resume-pool', 'eu'])).toMatchObject({ code: 0 });
    expect(await ops(['resume-pool', 'eu'])).toMatchObject({ code: 1, out: expect.stringContaining('pool "eu" is not paused') });
    expect(await db.sql`select * from worker.pauses`).toHaveLength(0);
    await db.sql`delete from worker.pool_capacity where pool = 'eu'`;
  });
});

describe('npm run ops: rate keys', () => {
  it("rate-limits shows each key's limit, window and pause; resume-rate-key ends a 429's pause and names the jobs due", async () => {
    // priority 0: the next claim's first job, whatever the file's other tests left queued
    const { job } = await enqueue(db.sql, { type: 'uppercase', payload: { text: 'rated' }, priority: 0, rateLimit: { key: 'ops:provider', limit: 4, per: '1m' } });
    const [claimed] = await claimJobs(db.sql, { workerId: 'ops-rate', limit: 1 });
    expect(claimed!.id).toBe(job.id);
    await db.sql`select worker.settle_rate_limited(${job.id}::uuid, ${claimed!.leaseToken}::uuid, 3600000, 'provider answered 429')`;
    const listed = await ops(['rate-limits']);
    expect(listed.code).toBe(0);
    expect(listed.out).toMatch(/ops:provider\s+4 per 60s\s+1\s+1\s+\S+.*provider answered 429/);
    const resumed = await ops(['resume-rate-key', 'ops:provider', '--by', 'alice']);
    expect(resumed).toMatchObject({ code: 0, out: expect.stringMatching(/resumed rate key ops:provider \(paused until .*: provider answered 429\); 1 job\(s\) due now/) });
    const [event] = await db.sql`select detail from worker.job_events where job_id = ${job.id} and kind = 'resumed'`;
    expect(event!.detail).toMatchObject({ rateKey: 'ops:provider', by: 'alice' });
    const [again, unknown, none] = await Promise.all([ops(['resume-rate-key', 'ops:provider']), ops(['resume-rate-key', 'ops:nope']), ops(['resume-rate-key'])]);
    expect(again).toMatchObject({ code: 1, out: expect.stringContaining('rate key "ops:provider" is not paused') });
    expect(unknown).toMatchObject({ code: 1, out: expect.stringContaining('rate key "ops:nope" does not exist') });
    expect(none).toMatchObject({ code: 2, out: expect.stringContaining('resume-rate-key needs a rate key') });
  });
});

describe('npm run ops: signals', () => {
  it('signal <id> <name> resumes a waiting job with the payload; event <name> --key delivers or keeps', async () => {
    const name = `ops-${crypto.randomUUID().slice(0, 8)}`;
    const registry = new JobRegistry(sampleJobTypes.filter((t) => t.type === 'await_signal'));
    await registry.sync(db.sql);
    const { job } = await enqueue(db.sql, { type: 'await_signal', payload: { name, key: 'k' }, priority: 0 });
    await runSteps({ sql: db.sql, registry, workerId: 'ops-test' }, { maxJobs: 1 });
    expect((await db.sql`select name, key from worker.job_waits where job_id = ${job.id}`)[0]).toEqual({ name, key: 'k' });

    const [noName, badJson] = await Promise.all([ops(['signal', job.id]), ops(['signal', job.id, name, '--payload', '{nope'])]);
    expect(noName).toMatchObject({ code: 2, out: expect.stringContaining('signal needs name') });
    expect(badJson).toMatchObject({ code: 2, out: expect.stringContaining('--payload must be JSON') });

    const sent = await ops(['signal', job.id, name, '--payload', '{"ok":true}']);
    expect(sent).toMatchObject({ code: 0, out: expect.stringContaining(`signalled ${job.id}`) });
    await runSteps({ sql: db.sql, registry, workerId: 'ops-test' }, { maxJobs: 1 });
    expect((await db.sql`select result from worker.jobs where id = ${job.id}`)[0]!.result).toMatchObject({ event: { outcome: 'signalled', payload: { ok: true } } });

    const kept = await ops(['event', name, '--key', 'k']);
    expect(kept).toMatchObject({ code: 0, out: expect.stringContaining('no job waits on it: kept as event') });
    const blank = await ops(['event', ' ']);
    expect(blank).toMatchObject({ code: 1, out: expect.stringContaining('name must be') });
  });
});

describe('npm run ops: bulk, dead letters, replay', () => {
  it('lists a dead-letter group, counts it with --dry-run, retries it by fingerprint, and replays a job', async () => {
    const rows = await db.sql<{ id: string }[]>`
      insert into worker.jobs (type, status, attempts, last_error, started_at, finished_at)
      select 'fail', 'failed', 3, 'disk quota 0x' || i || 'ff exceeded on volume ' || i, now(), now() from generate_series(10, 13) i returning id`;
    const [{ fp }] = (await db.sql<{ fp: string }[]>`select worker.error_fingerprint('disk quota 0x10ff exceeded on volume 10') as fp`) as unknown as [{ fp: string }];
    const listed = await ops(['dead-letters', '--type', 'fail']);
    expect(listed.code).toBe(0);
    expect(listed.out).toContain(fp);
    expect(listed.out).toContain('disk quota <hex> exceeded on volume <n>');

    const dry = await ops(['bulk-retry', '--type', 'fail', '--status', 'failed', '--fingerprint', fp, '--dry-run']);
    expect(dry).toMatchObject({ code: 0, out: expect.stringContaining('dry run: 4 job(s) would be requeued') });
    expect(await statusOf(rows[0]!.id)).toBe('failed');
    const real = await ops(['bulk-retry', '--type', 'fail', '--status', 'failed', '--fingerprint', fp]);
    expect(real).toMatchObject({ code: 0, out: expect.stringContaining('requeued 4 of 4 job(s) in 1 batch(es); skipped 0') });
    for (const { id } of rows) expect(await statusOf(id)).toBe('queued');

    const waiting = await queuedJob('bulk cancel me');
    const createdAfter = (await db.sql`select created_at from worker.jobs where id = ${waiting}`)[0]!.created_at.toISOString();
    expect(await ops(['bulk-cancel', '--type', 'uppercase', '--created-after', createdAfter, '--dry-run'])).toMatchObject({ code: 0, out: expect.stringContaining('dry run: 1 job(s)') });
    expect(await ops(['bulk-cancel', '--type', 'uppercase', '--created-after', createdAfter, '--reason', 'bad release'])).toMatchObject({ code: 0, out: expect.stringContaining('cancelled 1, cancel requested for 0') });
    expect(await statusOf(waiting)).toBe('cancelled');

    const empty = await ops(['bulk-retry']);
    expect(empty).toMatchObject({ code: 1, out: expect.stringContaining('an empty filter') });

    await db.sql`update worker.jobs set status = 'failed', finished_at = now() where id = ${rows[0]!.id}`;
    const replayed = await ops(['replay', rows[0]!.id, '--payload', '{"message":"again"}']);
    expect(replayed).toMatchObject({ code: 0, out: expect.stringContaining(`replayed ${rows[0]!.id} as `) });
    const newId = /as ([0-9a-f-]{36})/.exec(replayed.out)![1]!;
    expect((await db.sql`select payload from worker.jobs where id = ${newId}`)[0]!.payload).toEqual({ message: 'again' });
    expect(await ops(['replay', rows[0]!.id, '--payload', '[1]'])).toMatchObject({ code: 2, out: expect.stringContaining('--payload must be a JSON object') });
    expect(await ops(['replay', rows[0]!.id, '--from-step', 'nope'])).toMatchObject({ code: 1, out: expect.stringContaining('never reached step "nope"') });
  });
});

describe('npm run ops -- bulk-cancel meeting contention', () => {
  it('runs a batch that met a deadlock again: it cancels everything and exits 0', async () => {
    const ids = [await queuedJob('contended bulk 1'), await queuedJob('contended bulk 2'), await queuedJob('contended bulk 3')];
    const createdAfter = (await db.sql`select min(created_at) as at from worker.jobs where id = any(${ids})`)[0]!.at.toISOString();
    const faults = await installFaults(db.sql);
    try {
      await faults.arm({ count: 3, codes: ['40P01', '55P03'] });
      const run = await ops(['bulk-cancel', '--type', 'uppercase', '--created-after', createdAfter, '--reason', 'contended']);
      expect(run).toMatchObject({ code: 0, out: expect.stringContaining('cancelled 3, cancel requested for 0') });
      expect(await faults.raised()).toBe(3);
      for (const id of ids) expect(await statusOf(id)).toBe('cancelled');
    } finally {
      await faults.remove();
    }
  });
});
