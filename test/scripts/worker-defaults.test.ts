import { spawn } from 'node:child_process';
import { beforeAll, describe, expect, it } from 'vitest';
import { enqueueBatch } from '../../queue/index.ts';
import {
  defaultLoops, loopConcurrencies, parseWorkerOptions, WORKER_DEFAULTS, WorkerUsageError,
} from '../../scripts/lib/worker-options.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { installFaults } from '../support/faults.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});

/** `scripts/worker.ts` with `args`; resolves with its exit code and output once it exits. */
function worker(args: string[], databaseUrl = db.url): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/worker.ts', ...args], {
    env: { ...process.env, DATABASE_URL: databaseUrl },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

const lines = (stdout: string) => stdout.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);

describe('npm run worker: options', () => {
  it('defaults to 512 steps in flight over 4 connections, in 2 loops of 256', () => {
    expect(parseWorkerOptions([])).toEqual({
      drain: false, pool: null, concurrency: 512, connections: 4, loops: 2, graceMs: 10_000, pollMs: 200, types: null,
    });
    expect(WORKER_DEFAULTS).toMatchObject({ concurrency: 512, connections: 4 });
  });

  it('without --loops: one loop per 256 steps, at most one per connection', () => {
    expect(defaultLoops(5, 4)).toBe(1);
    expect(defaultLoops(256, 4)).toBe(1);
    expect(defaultLoops(257, 4)).toBe(2);
    expect(defaultLoops(1000, 4)).toBe(4);
    expect(defaultLoops(1000, 2)).toBe(2);
    expect(parseWorkerOptions(['--concurrency', '1000', '--connections', '8'])).toMatchObject({ concurrency: 1000, connections: 8, loops: 4 });
  });

  it('splits the steps in flight between the loops, every step given to one loop', () => {
    expect(loopConcurrencies(256, 2)).toEqual([128, 128]);
    expect(loopConcurrencies(1000, 3)).toEqual([334, 333, 333]);
    expect(loopConcurrencies(5, 5)).toEqual([1, 1, 1, 1, 1]);
  });

  it.each([
    [['--concurrency', '0'], '--concurrency must be an integer from 1 to 1000, got "0"'],
    [['--concurrency', '1001'], '--concurrency must be an integer from 1 to 1000, got "1001"'],
    [['--concurrency', 'lots'], '--concurrency must be an integer from 1 to 1000, got "lots"'],
    [['--concurrency', '2.5'], '--concurrency must be an integer from 1 to 1000, got "2.5"'],
    [['--connections', '0'], '--connections must be an integer from 1 to 1000, got "0"'],
    [['--connections', ''], '--connections must be an integer from 1 to 1000, got ""'],
    [['--loops', '3', '--connections', '2'], '--loops 3 is more than --connections 2: each loop needs a connection for its claims'],
    [['--loops', '4', '--concurrency', '3'], '--loops 4 is more than --concurrency 3: each loop runs at least one step'],
    [['--grace-ms=-1'], '--grace-ms must be an integer from 0 to 3600000, got "-1"'],
    [['--threads', '4'], "Unknown option '--threads'"],
  ])('refuses %j: %s', (argv, message) => {
    expect(() => parseWorkerOptions(argv)).toThrow(WorkerUsageError);
    expect(() => parseWorkerOptions(argv)).toThrow(message);
  });
});

describe('npm run worker: refused settings', () => {
  // A database nobody listens on: a refusal that comes from the options never connects.
  const NOWHERE = 'postgres://postgres@127.0.0.1:1/nowhere';

  it.each([
    [['--concurrency', '0'], '--concurrency must be an integer from 1 to 1000'],
    [['--concurrency', '5000'], '--concurrency must be an integer from 1 to 1000'],
    [['--connections', 'none'], '--connections must be an integer from 1 to 1000'],
    [['--loops', '5'], '--loops 5 is more than --connections 4'],
  ])('%j: exits 2 with the error before connecting, writing nothing', async (argv, message) => {
    const run = await worker(['--drain', ...argv], NOWHERE);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(`error: ${message}`);
    expect(run.stderr).not.toMatch(/ECONNREFUSED|at .*\.ts:\d+/); // no stack, no connection attempt
    expect(run.stdout).toBe('');
  });

  it('--help prints every option and exits 0 without connecting', async () => {
    const run = await worker(['--help'], NOWHERE);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('--concurrency N');
    expect(run.stdout).toContain('--connections N');
    expect(run.stderr).toBe('');
  });

  it('--connections beyond what the server allows: exits 2 naming max_connections, before writing anything', async () => {
    const [limits] = await db.sql`
      select current_setting('max_connections')::int as max,
             current_setting('superuser_reserved_connections')::int
               + coalesce(current_setting('reserved_connections', true), '0')::int as reserved`;
    const usable = limits!.max - limits!.reserved;
    const typesBefore = await db.sql`select type from worker.job_types order by type`;
    const run = await worker(['--drain', '--types', 'test/fixtures/slow-job-types.ts', '--connections', String(usable + 1)]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(`error: --connections ${usable + 1} is more than the server allows: max_connections ${limits!.max}`);
    expect(run.stderr).toContain(`leaves ${usable}`);
    expect(run.stdout).toBe('');
    // the registry sync (the worker's first write) never ran: the fixture's type was not added
    expect(await db.sql`select type from worker.job_types order by type`).toEqual(typesBefore);
  });
});

describe('npm run worker: at its defaults', () => {
  it("reports its settings in the 'worker started' line and drains more jobs than one claim holds", async () => {
    const jobs = 1200; // more than both loops' 512 steps: several claims per loop
    for (let i = 0; i < jobs; i += 400) {
      await enqueueBatch(db.sql, Array.from({ length: 400 }, (_, k) => ({ type: 'uppercase', payload: { text: `job ${i + k}` } })));
    }
    const run = await worker(['--drain']);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const log = lines(run.stdout);
    expect(log[0]).toMatchObject({ level: 'info', msg: 'worker started', pool: null, concurrency: 512, connections: 4, loops: 2, drain: true });
    expect(log.filter((l) => l.outcome === 'done')).toHaveLength(jobs);
    expect(log.at(-1)).toMatchObject({ msg: 'worker stopped', claimed: jobs, done: jobs, failed: 0, lost: 0 });
    const [row] = await db.sql`select count(*)::int as n from worker.jobs where type = 'uppercase' and status = 'done'`;
    expect(row!.n).toBe(jobs);
    // both loops claimed: more claims than one loop alone could hold at once
    const [claims] = await db.sql`
      select count(distinct claimed_at)::int as n from worker.jobs where type = 'uppercase'`;
    expect(claims!.n).toBeGreaterThan(2);
  });
});

describe('npm run worker: a failed claim', () => {
  it('a claim that meets deadlocks and serialization failures is retried, one warn line each: the worker drains and exits 0', async () => {
    await db.sql`delete from worker.jobs`;
    await enqueueBatch(db.sql, Array.from({ length: 50 }, (_, k) => ({ type: 'uppercase', payload: { text: `contended ${k}` } })));
    const faults = await installFaults(db.sql);
    try {
      // the first 15 UPDATE statements of worker.jobs fail: the claims (settle_and_claim) of both
      // loops, each more often than the claim's own 5 tries
      await faults.arm({ count: 15, codes: ['40P01', '40001'] });
      const run = await worker(['--drain']);
      expect(run.stderr).toBe('');
      expect(run.code).toBe(0);
      expect(await faults.raised()).toBe(15);
      const log = lines(run.stdout);
      const retries = log.filter((l) => l.msg === 'claim failed, retrying');
      expect(retries.length).toBeGreaterThan(0);
      expect(retries.every((l) => l.level === 'warn' && l.kind === 'contention' && ['40P01', '40001'].includes(l.code as string))).toBe(true);
      expect(log.at(-1)).toMatchObject({ msg: 'worker stopped', claimed: 50, done: 50, lost: 0 });
      const [row] = await db.sql`select count(*)::int as n from worker.jobs where status = 'done'`;
      expect(row!.n).toBe(50);
    } finally {
      await faults.remove();
    }
  });

  it('stops the worker: one error line for all its loops, exit 1', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/worker.ts', '--poll-ms', '20'], {
      env: { ...process.env, DATABASE_URL: db.url },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const exit = new Promise<number | null>((resolve) => child.on('close', resolve));
    try {
      const deadline = Date.now() + 20_000;
      while (!stdout.includes('"msg":"worker started"')) {
        if (Date.now() > deadline) throw new Error(`the worker did not start: ${stderr}`);
        await new Promise((r) => setTimeout(r, 25));
      }
      // Both loops poll the empty queue; the next claim of one of them finds no claim function.
      await db.sql`alter function worker.settle_and_claim rename to settle_and_claim_gone`;
      expect(await exit).toBe(1);
      expect(stderr.match(/"msg":"worker stopped: the database failed"/g)).toHaveLength(1);
      expect(stderr).toContain('settle_and_claim');
      expect(stdout).not.toContain('"msg":"worker stopped"');
    } finally {
      await db.sql`alter function if exists worker.settle_and_claim_gone rename to settle_and_claim`.catch(() => {});
      child.kill('SIGKILL');
    }
  });
});
