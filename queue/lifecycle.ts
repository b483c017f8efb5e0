import type { JobStatus } from './job.ts';

/**
 * The job lifecycle in one place: every statement that writes a job's `status`, where it lives,
 * the fence that decides whether it may, and the rows it locks in the order it takes them; and
 * the one lock order they all follow. Nothing else writes `status` (test/engine/lifecycle.test.ts
 * scans the SQL and TypeScript for such statements and fails on one this list does not name), and
 * docs/engine.md shows this list as rendered by `lifecycleTable()` and `lockOrderList()`.
 */

export interface Transition {
  /** The operation, as the docs and the API name it. */
  operation: string;
  /** The one file that holds the statement. */
  home: string;
  /** The statuses it moves a job from ('new': it inserts the row). */
  from: readonly (JobStatus | 'new')[];
  to: readonly JobStatus[];
  /** What a row must be for the statement to touch it; a row that is not matches nothing. */
  fence: string;
  /** The rows it locks, in the order it takes them. */
  locks: readonly string[];
}

const FN = (name: string) => `migrations/functions/worker.${name}.sql`;
const OWNED = 'lease_token and status running';

export const LIFECYCLE: readonly Transition[] = [
  {
    operation: 'enqueue (batch)', home: FN('enqueue_jobs'), from: ['new'], to: ['queued'],
    fence: 'unique indexes: one waiting and one active job per dedupe key', locks: ['each submit key', 'the new rows'],
  },
  {
    operation: 'enqueue (one), supersede', home: FN('enqueue_prepared'), from: ['new', 'queued'], to: ['queued', 'cancelled'],
    fence: 'supersedes only a never-started queued job of the dedupe key', locks: ['the submit key', 'the superseded job', 'the new row'],
  },
  {
    operation: 'claim (worker.claim_jobs picks the plain path, worker.claim_plain, or its limited walk; both lease here)',
    home: FN('lease_jobs'), from: ['queued'], to: ['running'],
    fence: 'queued, due, eligible (worker.claim_eligible), locked by the claim',
    locks: ['the pool capacity row', 'concurrency keys in key order', 'rate keys (skip locked)', 'the jobs (skip locked)'],
  },
  {
    operation: 'done', home: FN('complete_jobs'), from: ['running'], to: ['done'],
    fence: OWNED, locks: ['jobs without a parent, by id', 'then each child by parent and id: its row, its join row, its parent'],
  },
  {
    operation: 'continue, retry, fail, cancel acknowledged, release', home: 'queue/driver/settle.ts', from: ['running'], to: ['queued', 'failed', 'cancelled'],
    fence: OWNED, locks: ['the job', 'a child: its join row, then its parent'],
  },
  {
    operation: 'rate limited (429)', home: FN('settle_rate_limited'), from: ['running'], to: ['queued'],
    fence: OWNED, locks: ['the job', 'its rate key'],
  },
  {
    operation: 'wait for an event', home: FN('wait_for'), from: ['running'], to: ['queued'],
    fence: OWNED, locks: ['the signal channel', 'the job'],
  },
  {
    operation: 'spawn children', home: FN('spawn_children'), from: ['running'], to: ['queued'],
    fence: OWNED, locks: ['the parent', 'its new children'],
  },
  {
    operation: 'cancel (one or in bulk)', home: FN('cancel_job'), from: ['queued'], to: ['cancelled'],
    fence: 'queued or running (a started job gets a request, not a status)',
    locks: ['unfinished descendants, deepest first, by parent and id', 'the jobs by id', 'per child: its join row, then its parent'],
  },
  {
    operation: 'requeue (one or in bulk)', home: FN('requeue_job'), from: ['failed', 'cancelled', 'oom_killed'], to: ['queued'],
    fence: 'failed, cancelled or oom_killed', locks: ['the jobs by id', 'per child: its join row'],
  },
  {
    operation: 'fail by hand', home: FN('fail_job'), from: ['queued', 'running'], to: ['failed'],
    fence: 'queued or running', locks: ['the job', 'a child: its join row, then its parent'],
  },
  {
    operation: 'release a lease by hand', home: FN('release_job_lease'), from: ['running'], to: ['queued'],
    fence: 'running', locks: ['the job'],
  },
  {
    operation: 'rescue an expired lease', home: FN('rescue_expired_leases'), from: ['running'], to: ['queued', 'failed', 'oom_killed'],
    fence: 'running with its lease past', locks: ['the jobs (skip locked)', 'per child: its join row, then its parent'],
  },
  {
    operation: 'benchmark fixtures', home: 'queue/driver/benchmark.ts', from: ['new'], to: ['queued', 'done'],
    fence: 'none: `npm run bench` only, never on a request path', locks: ['the new rows'],
  },
];

/** The one lock order: a statement that takes rows of two of these takes them in this order. */
export const LOCK_ORDER: readonly string[] = [
  'a signal channel (worker.signal_channels), before any job (a wait, a signal)',
  'a submit key (worker.submit_keys), before the job a new one supersedes',
  'the claim\'s rows: the pool capacity row, then concurrency keys in key order (a claim waits only for keys after the last it holds), then rate keys and jobs without waiting (skip locked)',
  'jobs: every unfinished descendant before its ancestors, deepest first and by parent and id within a depth, then the jobs a statement was given, by id (worker.lock_job_trees); a child\'s settle takes its own row, then its join row (worker.child_joins), then its parent\'s, and a batch of children takes them by parent and id',
  'a job\'s rate key after the job (a 429\'s settle)',
];

export function lifecycleTable(): string {
  const rows = LIFECYCLE.map((t) =>
    `| ${t.operation} | \`${t.home}\` | ${t.from.join(', ')} → ${t.to.join(', ')} | ${t.fence} | ${t.locks.join('; ')} |`);
  return ['| operation | home | status | fence | locks, in order |', '| --- | --- | --- | --- | --- |', ...rows].join('\n');
}

export function lockOrderList(): string {
  return LOCK_ORDER.map((line, i) => `${i + 1}. ${line}`).join('\n');
}
