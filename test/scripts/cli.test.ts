import { spawn, type ChildProcess } from 'node:child_process';
import { beforeAll, describe, expect, it } from 'vitest';
import { enqueue, getJob, JobRegistry } from '../../queue/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { slow } from '../fixtures/slow-job-types.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
  await new JobRegistry([slow]).sync(db.sql);
});

interface Run {
  child: ChildProcess;
  output: () => string;
  exit: Promise<number | null>;
}

function runScript(script: string, args: string[] = []): Run {
  const child = spawn(process.execPath, ['--import', 'tsx', `scripts/${script}.ts`, ...args], {
    env: { ...process.env, DATABASE_URL: db.url },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  // 'close', not 'exit': at exit the last output can still be in the pipe
  const exit = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  return { child, output: () => out, exit };
}

async function until(check: () => Promise<boolean>, what: string, timeoutMs = 20_000): Promise<void> {
  const start = Date.now();
  while (!(await check())) {
    if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const statusOf = async (id: string) => (await getJob(db.sql, id))!.job.status;

describe('npm run worker', () => {
  it('on SIGTERM lets the in-flight step finish, then exits 0', async () => {
    const { job } = await enqueue(db.sql, { type: 'slow', payload: { ms: 1500 } });
    const run = runScript('worker', ['--types', 'test/fixtures/slow-job-types.ts', '--grace-ms', '20000']);
    await until(async () => (await statusOf(job.id)) === 'running', 'the slow job to start');
    run.child.kill('SIGTERM');
    expect(await run.exit).toBe(0);
    expect(await statusOf(job.id)).toBe('done');
    expect(run.output()).toContain('SIGTERM: finishing in-flight steps');
  });

  it('when the grace period runs out, releases the lease for immediate reclaim without spending the attempt', async () => {
    const { job } = await enqueue(db.sql, { type: 'slow', payload: { ms: 60_000 } });
    const run = runScript('worker', ['--types', 'test/fixtures/slow-job-types.ts', '--grace-ms', '200']);
    await until(async () => (await statusOf(job.id)) === 'running', 'the slow job to start');
    run.child.kill('SIGTERM');
    expect(await run.exit).toBe(0);
    const after = await getJob(db.sql, job.id);
    expect(after!.job).toMatchObject({ status: 'queued', attempts: 0, lockedUntil: null });
    expect(after!.events.at(-1)!.kind).toBe('lease_released');
    await db.sql`update worker.jobs set status = 'cancelled', finished_at = now() where id = ${job.id}`;
  });

  it('produce enqueues, worker --drain runs them and exits, inspect shows the depth', async () => {
    const produce = runScript('produce', ['--type', 'uppercase', '--count', '25']);
    expect(await produce.exit).toBe(0);
    expect(produce.output()).toContain('enqueued 25 uppercase job(s)');
    const worker = runScript('worker', ['--drain']);
    expect(await worker.exit).toBe(0);
    const [row] = await db.sql`select count(*)::int as n from worker.jobs where type = 'uppercase' and status = 'done'`;
    expect(row!.n).toBe(25);
    const inspect = runScript('inspect');
    expect(await inspect.exit).toBe(0);
    expect(inspect.output()).toMatch(/done\s+uppercase\s+25/);
    expect(inspect.output()).toContain('leader lease');
  });

  it('refuses bad arguments with a clear error', async () => {
    const produce = runScript('produce', ['--count', 'many']);
    expect(await produce.exit).toBe(2);
    expect(produce.output()).toContain('--count must be an integer');
    const unknown = runScript('produce', ['--type', 'no_such_type']);
    expect(await unknown.exit).toBe(2);
    expect(unknown.output()).toContain('unknown job type "no_such_type"');
  });
});
