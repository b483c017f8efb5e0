import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { claimJobs, enqueue } from '../../queue/index.ts';
import { startDevStack, type DevStack } from '../support/dev-stack.ts';

/**
 * docs/manual.md maps the operations manual's quick checks, manual operations, self-healing and
 * timing reference to ours. Its tables are read here: every SQL, `npm run ops`, HTTP and curl
 * command in them runs against the `npm start` stack and must do what its row says, and every
 * number of the timing table is compared with the code's default.
 */
const run = promisify(execFile);
const DOC = readFileSync('docs/manual.md', 'utf8');

/** The rows of the table under `## heading`: cells as written, the header and divider left out. */
function table(heading: string): string[][] {
  const section = DOC.split(/^## /m).find((s) => s.startsWith(`${heading}\n`));
  if (!section) throw new Error(`docs/manual.md has no section "${heading}"`);
  const lines = section.split('\n').filter((l) => l.startsWith('|'));
  return lines.slice(2).map((l) => l.slice(1, -1).split(/(?<!\\)\|/).map((c) => c.trim()));
}
const codeSpans = (cell: string) => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);
const rowsByName = (rows: string[][]) => new Map(rows.map((r) => [r[0]!, r]));
/** The timing table's "ours" column by the manual's event. */
const timings = () => new Map(table('Timing reference').map((r) => [r[0]!, r[4]!]));
/** `2 min`, `every 1 min`, `4 h` in milliseconds. */
function ms(text: string): number {
  const m = /^(?:every )?(\d+) (min|h)$/.exec(text);
  if (!m) throw new Error(`not a duration: ${text}`);
  return Number(m[1]) * (m[2] === 'h' ? 3_600_000 : 60_000);
}

// The manual's own rows (worker-queue-operations-manual): each must have its row on the page.
const QUICK_CHECKS = ['Queue depth by status', 'Who holds the dispatcher lease?', 'Active workers', 'Stuck jobs (>2h — alert territory)', 'Check the dispatcher timer'];
const MANUAL_OPERATIONS = ['Re-queue a stuck job', 'Fail a job permanently', 'Kill a running worker', 'Force dispatcher lease release',
  'Trigger dispatcher manually', 'Force re-queue all stale running jobs now', 'Enable vps-i1 as emergency fallback'];
const SELF_HEALING = ['Worker process crashes silently', 'Worker OOM (exit 2)', 'Dispatcher process dies', 'Dispatcher server reboots',
  'Lease stuck on dead server', 'bms-4 fully offline', 'WIP label orphaned after crash'];
const TIMING = ['Dispatcher cycle', '`reset_stale_workers()`', 'Job stale threshold', 'Max retries', 'Dispatcher lease TTL',
  'SLA escalation — infra jobs', 'Prometheus stuck-job alert', '`NightlyTriageNotRunning`', 'Cron not firing'];

describe('docs/manual.md', () => {
  it("has a row for every row of the manual's tables, and no other", () => {
    expect(table('Quick checks').map((r) => r[0])).toEqual(QUICK_CHECKS);
    expect(table('Manual operations').map((r) => r[0])).toEqual(MANUAL_OPERATIONS);
    expect(table('Self-healing').map((r) => r[0])).toEqual(SELF_HEALING);
    expect(table('Timing reference').map((r) => r[0])).toEqual(TIMING);
  });

  it("gives each timing the code's default", () => {
    // each var's default as functions/config.ts declares it (`intVar('NAME', default, min, max)`)
    const declared = readFileSync('functions/config.ts', 'utf8');
    const fallback = (name: string) => Number(new RegExp(`intVar\\('${name}', ([\\d_]+),`).exec(declared)![1]!.replaceAll('_', ''));
    const config = { leaderLeaseMs: fallback('LEADER_LEASE_MS'), stuckJobMs: fallback('STUCK_JOB_MS'), scheduleGraceMs: fallback('SCHEDULE_GRACE_MS') };
    const ours = timings();
    const wrangler = readFileSync('wrangler.toml', 'utf8');
    expect(wrangler).toMatch(/^crons = \[[^\]]*"\* \* \* \* \*"/m); // the tick: every minute
    expect(ms(ours.get('Dispatcher cycle')!)).toBe(60_000);
    expect(ms(ours.get('`reset_stale_workers()`')!)).toBe(60_000);
    expect(ms(ours.get('Dispatcher lease TTL')!)).toBe(config.leaderLeaseMs);
    expect(ms(ours.get('Prometheus stuck-job alert')!)).toBe(config.stuckJobMs);
    expect(ms(ours.get('`NightlyTriageNotRunning`')!)).toBe(config.scheduleGraceMs);
    const rule = /alert: StarbaseCronNotRunning\n\s+expr: time\(\) - starbase_tick_last_run_timestamp_seconds > (\d+)/.exec(readFileSync('ops/prometheus/starbase-worker.rules.yml', 'utf8'));
    expect(Number(rule![1]) * 1000).toBe(ms(ours.get('Cron not firing')!));
  });
});

describe('run against the npm start stack, each command does what its row says', () => {
  let stack: DevStack;
  let sql: postgres.Sql;
  /** Jobs pinned to a pool no runner of the stack serves, so only the test moves them. */
  const POOL = 'manual-test';

  beforeAll(async () => {
    stack = await startDevStack();
    sql = postgres(stack.databaseUrl, { max: 2, onnotice: () => {} });
    await sql`insert into worker.pool_capacity (pool, enabled, max_running_weight) values ('vps-i1', false, 3) on conflict do nothing`;
  }, 150_000);
  afterAll(async () => {
    await sql?.end();
  });

  /** A job of POOL, running on `owner`'s lease; `stuck` moves its claim back 3 h, `expired` ends its lease. */
  async function runningJob(options: { stuck?: boolean; expired?: boolean } = {}): Promise<string> {
    const { job } = await enqueue(sql, { type: 'uppercase', payload: { text: 'manual' }, pool: POOL });
    const claimed = await claimJobs(sql, { workerId: 'bms-4', pool: POOL, limit: 100, types: ['uppercase'] });
    expect(claimed.map((j) => j.id)).toContain(job.id);
    if (options.stuck) await sql`update worker.jobs set claimed_at = now() - interval '3 hours', locked_until = now() + interval '1 hour' where id = ${job.id}`;
    if (options.expired) await sql`update worker.jobs set locked_until = now() - interval '1 second' where id = ${job.id}`;
    return job.id;
  }
  async function queuedJob(): Promise<string> {
    return (await enqueue(sql, { type: 'uppercase', payload: { text: 'manual' }, pool: POOL })).job.id;
  }
  const jobRow = async (id: string) => (await sql`select status, last_error, lease_token, cancel_requested_at, attempts, weight from worker.jobs where id = ${id}`)[0]!;

  /** A cell's `npm run ops -- …` command, run from the project as a reader runs it, on the stack's database. */
  async function ops(command: string, id?: string): Promise<string> {
    expect(command).toMatch(/^npm run ops -- /);
    const line = id ? command.replace('<id>', id) : command;
    const env: NodeJS.ProcessEnv = { ...process.env, STARBASE_DATA_DIR: stack.dataDir };
    delete env.DATABASE_URL; // the stack's database, found through its stack file
    const { stdout } = await run('bash', ['-c', line], { env, encoding: 'utf8' });
    return stdout;
  }
  /** A cell's `METHOD /path` with the dev token (admin, which holds every scope). */
  async function http(route: string, id?: string, body?: unknown): Promise<{ status: number; text: string }> {
    const [method, path] = route.split(' ') as [string, string];
    const res = await stack.api((id ? path.replace('<id>', id) : path), { method, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    return { status: res.status, text: await res.text() };
  }
  const cells = (heading: string, name: string) => {
    const row = rowsByName(table(heading)).get(name);
    expect(row, name).toBeDefined();
    return row!;
  };
  const opsOf = (row: string[], column: number) => codeSpans(row[column]!).filter((c) => c.startsWith('npm run ops'));
  const httpOf = (row: string[], column: number) => codeSpans(row[column]!).filter((c) => /^(GET|POST) \//.test(c));

  it("the per-type timings are the registered ones: a type that sets none (uppercase), and the infra jobs' deadline", async () => {
    await http('POST /v1/tick'); // the Worker registers its types
    const [uppercase] = await sql`select lease_ms, max_attempts from worker.job_types where type = 'uppercase'`;
    expect(ms(timings().get('Job stale threshold')!)).toBe(uppercase!.lease_ms);
    expect(Number(timings().get('Max retries'))).toBe(uppercase!.max_attempts);
    const infra = await sql`select type, deadline_ms::int, deadline_severity from worker.job_types where type in ('provision_cluster', 'provision_db') order by type`;
    const sla = ms(timings().get('SLA escalation — infra jobs')!);
    expect(infra).toEqual([
      { type: 'provision_cluster', deadline_ms: sla, deadline_severity: 'critical' },
      { type: 'provision_db', deadline_ms: sla, deadline_severity: 'critical' },
    ]);
  });

  it('the quick checks: SQL, ops and HTTP each show the running and the stuck job', async () => {
    await http('POST /v1/tick'); // a leader tick: the lease and a depth snapshot exist
    const stuck = await runningJob({ stuck: true });
    const rows = table('Quick checks');
    for (const row of rows) {
      const [name, sqlCell, opsCell] = row as [string, string, string, string];
      const [statement] = codeSpans(sqlCell);
      const answer = await sql.unsafe(statement!);
      const printed = await ops(codeSpans(opsCell)[0]!);
      const answers = await Promise.all(httpOf(row, 3).map((r) => http(r)));
      for (const a of answers) expect(a.status, `${name}: ${a.text}`).toBe(200);
      const shown = answers.map((a) => a.text).join('\n');
      switch (name) {
        case 'Queue depth by status':
          expect(Number(answer.find((r) => r.status === 'running')?.count)).toBeGreaterThanOrEqual(1);
          expect(printed).toMatch(/running\s+uppercase\s+\d+/);
          expect(shown).toMatch(/^starbase_queue_depth\{status="running"\} [1-9]/m);
          break;
        case 'Who holds the dispatcher lease?':
          expect(answer[0]).toMatchObject({ holder: 'default', expired: false });
          expect(printed).toMatch(/default/);
          expect(JSON.parse(shown)).toMatchObject({ holder: 'default' });
          break;
        case 'Active workers':
          expect(answer.map((r) => r.id)).toContain(stuck);
          expect(printed).toContain(stuck);
          expect(shown).toContain(stuck);
          break;
        case 'Stuck jobs (>2h — alert territory)':
          expect(answer.map((r) => r.id)).toContain(stuck);
          expect(printed).toContain(stuck);
          expect(shown).toMatch(/^starbase_stuck_jobs\{type="uppercase"\} [1-9]/m);
          break;
        case 'Check the dispatcher timer':
          expect(answer[0]!.last_tick).toBeInstanceOf(Date);
          expect(printed).toMatch(/expires/);
          expect(shown).toMatch(/^starbase_tick_last_run_timestamp_seconds [1-9]/m);
          expect(shown).toMatch(/"shards":/);
          break;
        default:
          throw new Error(`no check for the quick check "${name}"`);
      }
    }
    await sql`update worker.jobs set status = 'cancelled', finished_at = now(), locked_until = null where id = ${stuck}`;
  }, 120_000);

  it('the manual operations: each ops command, route and SQL statement does what the row says', async () => {
    type Via = 'ops' | 'http' | 'sql';
    for (const row of table('Manual operations')) {
      const name = row[0]!;
      const [opsCommand] = opsOf(row, 2);
      const [route] = httpOf(row, 3);
      const [statement] = codeSpans(row[4]!);
      const ways = ([['ops', opsCommand], ['http', route], ['sql', statement]] as const).filter(([, c]) => c !== undefined).map(([v]) => v as Via);
      /** The row's command by one way, on the job `id` (the `<id>` of the command). */
      const act = async (via: Via, id?: string, body?: unknown) => {
        if (via === 'ops') return void (await ops(opsCommand!, id));
        if (via === 'sql') return void (await sql.unsafe(id ? statement!.replace('<id>', id) : statement!));
        const answer = await http(route!, id, body);
        expect(answer.status, `${name}: ${answer.text}`).toBe(200);
      };
      switch (name) {
        case 'Re-queue a stuck job':
          expect(ways).toEqual(['ops', 'http', 'sql']);
          for (const via of ways) {
            const id = await runningJob({ stuck: true });
            await act(via, id);
            expect(await jobRow(id), via).toMatchObject({ status: 'queued', lease_token: null, attempts: 1 });
          }
          break;
        case 'Fail a job permanently':
          expect(ways).toEqual(['ops', 'http', 'sql']);
          for (const via of ways) {
            const id = via === 'http' ? await runningJob() : await queuedJob();
            await act(via, id, { reason: 'manually failed' });
            expect(await jobRow(id), via).toMatchObject({ status: 'failed', last_error: 'manually failed' });
          }
          break;
        case 'Kill a running worker':
          expect(ways).toEqual(['ops', 'http', 'sql']);
          for (const via of ways) {
            const id = await runningJob();
            await act(via, id, {});
            expect((await jobRow(id)).cancel_requested_at, via).toBeInstanceOf(Date);
          }
          break;
        case 'Force dispatcher lease release':
          expect(ways).toEqual(['ops', 'http', 'sql']);
          for (const via of ways) {
            await http('POST /v1/tick');
            await act(via);
            const [lease] = await sql`select expires_at < now() as expired from worker.leader_lease`;
            expect(lease!.expired, via).toBe(true);
          }
          break;
        case 'Trigger dispatcher manually': {
          expect(ways).toEqual(['http']);
          const tick = await http(route!);
          expect(tick.status).toBe(200);
          // the lease the row before expired: this tick takes it (or renews it, had the stack's own tick come first)
          expect(JSON.parse(tick.text).leader.outcome).toMatch(/^(acquired|renewed)$/);
          const [lease] = await sql`select expires_at > now() as held from worker.leader_lease`;
          expect(lease!.held).toBe(true);
          const [curl] = codeSpans(row[1]!).filter((c) => c.startsWith('curl '));
          const { stdout } = await run('bash', ['-c', `W=${stack.baseUrl.replace(/\/$/, '')}; ${curl}`], { encoding: 'utf8' });
          expect(stdout).toMatch(/Ran scheduled event/);
          break;
        }
        case 'Force re-queue all stale running jobs now':
          expect(ways).toEqual(['ops', 'http', 'sql']);
          for (const via of ways) {
            const id = await runningJob({ expired: true });
            await act(via);
            // re-queued one class up (a claim of the stack's own may have rescued it first: the same sweep)
            expect(await jobRow(id), via).toMatchObject({ status: 'queued', weight: 'heavy' });
          }
          break;
        case 'Enable vps-i1 as emergency fallback': {
          expect(ways).toEqual(['sql']);
          await act('sql');
          const [pool] = await sql`select enabled from worker.pool_capacity where pool = 'vps-i1'`;
          expect(pool!.enabled).toBe(true);
          break;
        }
        default:
          throw new Error(`no check for the manual operation "${name}"`);
      }
    }
  }, 180_000);
});
