import type { Sql } from '../../queue/db.ts';
import type { JobEvent } from '../../queue/job.ts';
import { allEvents, allJobs } from '../../queue/driver/tables.ts';

/**
 * Replays each job's history (worker.job_history: its event rows and the events its row holds) in order against the engine's state machine and reports
 * every place where history and the row disagree, or where two owners could have held the job at
 * once. Used by the chaos, database-fault and model tests and by `npm run soak`: whatever the
 * faults did, the history must be one a correct engine could have written. A tool, not a test
 * helper: tests may import tools, nothing outside test/ imports test/ (test/engine/layout.test.ts).
 */

export interface HistoryEvent {
  id: number;
  job_id: string;
  at: Date;
  kind: string;
  detail: Record<string, any>;
}

export interface HistoryJob {
  id: string;
  status: string;
  attempts: number;
  crashes: number;
  weight: string;
  result: unknown;
  max_attempts: number;
}

export interface HistoryTally {
  claims: number;
  leaseExpired: number;
  escalated: number;
  oomKilled: number;
  failedByRescue: number;
  done: number;
}

export interface HistoryReport {
  problems: string[];
  tally: HistoryTally;
  /** For each lease token: the event that ended that claim (a settle, or lease_expired). */
  closureOf: Map<string, { kind: string; eventId: number }>;
  /** The runner (locked_by) each lease token was issued to. */
  ownerOfToken: Map<string, string>;
}

/**
 * Where a crash re-queues a job of each weight class (worker.weight_classes.escalates_to, seeded by
 * migrations/0170): the manual's "re-queues as weight=heavy; terminal if heavy also OOM". A class
 * that is not here escalates nowhere.
 */
export const ESCALATES_TO: Readonly<Record<string, string>> = { light: 'heavy', playwright: 'heavy' };

/** An engine event in the replay's shape. */
export function historyEvent(e: JobEvent): HistoryEvent {
  return { id: e.id, job_id: e.jobId, at: e.at, kind: e.kind, detail: e.detail };
}

/** Reads the jobs (optionally of one type) and their events, and replays them. */
export async function checkHistory(sql: Sql, options: { type?: string; leaseMs?: number } = {}): Promise<HistoryReport & { jobs: HistoryJob[] }> {
  const filter = options.type ? { type: options.type } : {};
  const jobs: HistoryJob[] = (await allJobs(sql, filter)).map((j) => ({
    id: j.id, status: j.status, attempts: j.attempts, crashes: j.crashes, weight: j.weight, result: j.result, max_attempts: j.maxAttempts,
  }));
  const events = (await allEvents(sql, filter)).map(historyEvent);
  return { jobs, ...replayHistory(jobs, events, options) };
}

export function replayHistory(jobs: HistoryJob[], events: HistoryEvent[], options: { leaseMs?: number } = {}): HistoryReport {
  const byJob = new Map<string, HistoryEvent[]>();
  for (const e of events) (byJob.get(e.job_id) ?? byJob.set(e.job_id, []).get(e.job_id)!).push(e);
  const closureOf = new Map<string, { kind: string; eventId: number }>();
  const ownerOfToken = new Map<string, string>();
  const problems: string[] = [];
  const tally: HistoryTally = { claims: 0, leaseExpired: 0, escalated: 0, oomKilled: 0, failedByRescue: 0, done: 0 };

  for (const job of jobs) {
    const evs = byJob.get(job.id) ?? [];
    const fail = (msg: string) => problems.push(`job ${job.id}: ${msg} — events ${evs.map((e) => e.kind).join(',')}`);
    let owner: { token: string; lockedUntil: number } | null = null;
    let status = 'queued';
    let attempts = 0;
    let crashes = 0;
    // the weight it was enqueued at: the first escalation's origin, else where it still is (a job
    // the rescue fails on its last attempt keeps its weight: nothing was requeued, 0082)
    let weight: string = evs.find((e) => e.kind === 'escalated')?.detail.from ?? job.weight;
    let weightAtExpiry = weight;
    let dones = 0;
    let started = false;
    let prev: HistoryEvent | undefined;
    if (evs[0]?.kind !== 'enqueued') fail('the first event is not enqueued');
    const close = (e: HistoryEvent) => {
      closureOf.set(owner!.token, { kind: e.kind, eventId: e.id });
      owner = null;
    };
    for (const e of evs) {
      switch (e.kind) {
        case 'enqueued':
        case 'cancel_requested':
        case 'priority_changed':
        case 'rescheduled':
        case 'resumed':
        case 'waiting':
        case 'signalled':
        case 'wait_timed_out':
        case 'replay_of':
        case 'replayed_by':
          break;
        case 'claimed': {
          tally.claims++;
          if (owner) fail(`claimed by ${e.detail.owner} while token ${owner.token} still held it`);
          if (status !== 'queued') fail(`claimed while ${status}`);
          attempts++;
          if (e.detail.attempt !== attempts) fail(`the claim says attempt ${e.detail.attempt}, the replay ${attempts}`);
          const lockedUntil = new Date(e.detail.lockedUntil).getTime();
          if (options.leaseMs !== undefined && lockedUntil - e.at.getTime() !== options.leaseMs) fail('the lease is not the type lease');
          owner = { token: e.detail.token, lockedUntil };
          ownerOfToken.set(e.detail.token, e.detail.owner);
          status = 'running';
          started = true;
          break;
        }
        case 'checkpoint':
        case 'retry':
        case 'done':
          if (!owner) {
            fail(`${e.kind} with no owner`);
            break;
          }
          close(e);
          if (e.kind === 'checkpoint') attempts = 0;
          if (e.kind === 'done') dones++;
          status = e.kind === 'done' ? 'done' : 'queued';
          break;
        case 'lease_released':
          // the runner's own release (graceful shutdown) gives the attempt back; an operator's does not
          if (!owner) fail('lease_released with no owner');
          else close(e);
          if (!e.detail.manual) attempts = Math.max(0, attempts - 1);
          status = 'queued';
          break;
        case 'requeued':
          if (owner) fail('requeued while owned');
          attempts = 0;
          status = 'queued';
          break;
        case 'failed':
          if (e.detail.reason === 'lease expired') {
            if (prev?.kind !== 'lease_expired') fail('failed by the rescue without a lease_expired before it');
            if (attempts < job.max_attempts) fail(`failed by the rescue at attempt ${attempts} < ${job.max_attempts}`);
            if (!ESCALATES_TO[weightAtExpiry]) fail(`failed by the rescue at ${weightAtExpiry}: a class that escalates nowhere ends oom_killed`);
            tally.failedByRescue++;
          } else if (e.detail.manual) {
            if (owner) close(e);
          } else if (!owner) {
            fail('failed with no owner');
          } else {
            close(e);
          }
          status = 'failed';
          break;
        case 'lease_expired':
          if (!owner) {
            fail('lease_expired with no owner');
            break;
          }
          if (e.detail.token !== owner.token) fail('lease_expired names another token than the owner');
          if (e.at.getTime() <= owner.lockedUntil) fail('lease_expired before the lease ran out');
          tally.leaseExpired++;
          crashes++;
          weightAtExpiry = weight;
          close(e);
          status = 'queued';
          break;
        case 'escalated':
          if (prev?.kind !== 'lease_expired') fail('escalated without a lease_expired before it');
          if (e.detail.from !== weight) fail(`escalated from ${e.detail.from} while ${weight}`);
          if (e.detail.to !== ESCALATES_TO[weight]) fail(`escalated from ${weight} to ${e.detail.to}, not to ${ESCALATES_TO[weight] ?? 'nowhere'}`);
          weight = e.detail.to;
          tally.escalated++;
          break;
        case 'oom_killed':
          if (prev?.kind !== 'lease_expired') fail('oom_killed without a lease_expired before it');
          // at a class that escalates nowhere, or where the job's pool cannot run its escalation (the event names it)
          if (ESCALATES_TO[weightAtExpiry] && (e.detail.weight !== weightAtExpiry || e.detail.next !== ESCALATES_TO[weightAtExpiry])) {
            fail(`oom_killed after a crash at ${weightAtExpiry}, which escalates to ${ESCALATES_TO[weightAtExpiry]}`);
          }
          tally.oomKilled++;
          status = 'oom_killed';
          break;
        case 'cancelled':
          if (e.detail.hookRan) {
            if (!owner) fail('cancelled (hook ran) with no owner');
            else close(e);
          } else if (started || owner) fail('cancelled at once though it had started');
          status = 'cancelled';
          break;
        case 'superseded':
          if (started || owner) fail('superseded though it had started');
          status = 'cancelled';
          break;
        default:
          fail(`unexpected event ${e.kind}`);
      }
      prev = e;
    }
    if (owner && job.status !== 'running') fail('owned at the end of its history, but the row is not running');
    if (status !== job.status) fail(`the replay ends ${status}, the row says ${job.status}`);
    if (attempts !== job.attempts) fail(`the replay counts ${attempts} attempts, the row ${job.attempts}`);
    if (crashes !== job.crashes) fail(`the replay counts ${crashes} crashes, the row ${job.crashes}`);
    if (weight !== job.weight) fail(`the replay ends at weight ${weight}, the row at ${job.weight}`);
    if (dones > 1) fail(`${dones} done events`);
    if ((job.status === 'done') !== (dones === 1)) fail('the done status and the done events disagree');
    if (job.status === 'done') tally.done++;
    else if (job.result !== null) fail('a result on a job that is not done');
  }
  return { problems, tally, closureOf, ownerOfToken };
}
