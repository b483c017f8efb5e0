import { ConflictError, type BulkCancelResult, type BulkRequeueResult, type EnqueueResult, type Job, type RetryOutcome } from '../../../queue/index.ts';
import { replayHistory, type HistoryEvent } from '../history.ts';
import { signalRefusalAllowed, type FlowInvariant } from './flow-checks.ts';
import { bulkCancels, describeOp, type Op, type Round } from './generator.ts';
import { Model, sameRequest, type PruneCutoffs } from './model.ts';

/**
 * The invariants the model-based test checks after every round and every history. Each check
 * compares what the engine answered and wrote with the model's rules (model.ts) and returns
 * violations; none throws, so one history can show several broken promises at once.
 */

export type Invariant =
  /** Every enqueue that returned an id still has that job, or a superseded_by naming a job that exists. */
  | 'answered-job-survives'
  /** A row exists only if an enqueue answered its id. */
  | 'no-phantom-job'
  /** Rows disappear only by a prune, after their retention. */
  | 'rows-vanish-only-by-prune'
  /** No two live leases on one job. */
  | 'single-owner'
  /** A settle holds exactly when its lease is the job's current one. */
  | 'fence'
  /** Concurrency-key limits and pool weights are never exceeded, at any sampled moment. */
  | 'limits'
  /** A claim takes only rows of its pool or of no pool. */
  | 'routing'
  /** Any claimable job is claimed within ceil(N/L) + 2 claims of size L. */
  | 'no-starvation'
  /** An identical resubmit returns the job of its submit key, before and after pruning. */
  | 'resubmit-identical'
  /** A submit key answers one job; another request under it is a 409. */
  | 'submit-key'
  /** A superseded job names the job that superseded it. */
  | 'dedupe'
  /** A finished job cannot be cancelled. */
  | 'cancel'
  /** A bulk operation's answer adds up (applied + skipped = matched) and its walk ends. */
  | 'bulk'
  /** Every job's event history (as far as retained) replays to its row. */
  | 'history-replays'
  /** An operation failed in a way no rule allows. */
  | 'unexpected-error'
  /** Signals, child jobs and the rate key (flow-checks.ts). */
  | FlowInvariant;

export interface Violation {
  invariant: Invariant;
  message: string;
}

/** An operation and what the engine answered (value) or threw (error). */
export interface Outcome {
  op: Op;
  value?: unknown;
  error?: unknown;
}

/** One client's enqueue of one key in a burst round. */
export interface BurstAnswer {
  key: string;
  client: number;
  value?: EnqueueResult;
  error?: unknown;
}

/** The running jobs' usage at one moment of a round. */
export interface UsageSample {
  keys: Map<string, number>;
  pools: Map<string, number>;
}

const short = (id: string | null | undefined) => (id ? id.slice(-12) : String(id));
const errorText = (e: unknown) => `${(e as Error)?.name ?? 'Error'}: ${(e as Error)?.message ?? String(e)}`;

export function checkUsage(model: Model, sample: UsageSample, when: string): Violation[] {
  const out: Violation[] = [];
  for (const [key, n] of sample.keys) {
    const limit = model.config.keyLimits[key];
    if (limit !== undefined && n > limit) {
      out.push({ invariant: 'limits', message: `${when}: ${n} live leases on concurrency key ${key} (limit ${limit})` });
    }
  }
  for (const [pool, weight] of sample.pools) {
    const cap = model.poolCapacity(pool);
    if (weight > cap) out.push({ invariant: 'limits', message: `${when}: running weight ${weight} in pool ${pool} (max_running_weight ${cap})` });
  }
  return out;
}

/**
 * After one round: `model` still holds the rows as they were before it (the round's start),
 * `rows` is the table after it.
 */
export function checkRound(
  model: Model, round: Round, outcomes: Outcome[], burst: BurstAnswer[], rows: Job[], samples: UsageSample[], cutoffs: PruneCutoffs | undefined, spawned: string[],
): Violation[] {
  const out: Violation[] = [];
  const now = model.clock;
  const after = new Map(rows.map((j) => [j.id, j]));
  const answeredNow = new Set<string>(spawned);
  for (const o of outcomes) {
    if (o.op.kind === 'enqueue' && o.value) answeredNow.add((o.value as EnqueueResult).job.id);
    if (o.op.kind === 'batch' && o.value) for (const r of o.value as EnqueueResult[]) answeredNow.add(r.job.id);
  }
  for (const a of burst) if (a.value) answeredNow.add(a.value.job.id);

  out.push(...checkOutcomes(model, outcomes, after));
  if (round.kind === 'burst') out.push(...checkBurst(model, burst, after));

  // rows appear only by an enqueue and disappear only by a prune past retention
  for (const [id, before] of model.jobs) {
    if (after.has(id)) continue;
    if (cutoffs && Model.prunable(before, cutoffs)) continue;
    out.push({ invariant: 'rows-vanish-only-by-prune', message: `job ${short(id)} (${before.status}, finished ${before.finishedAt?.toISOString() ?? 'never'}) disappeared in a round without a prune that may delete it` });
  }
  for (const j of rows) {
    if (!model.seen.has(j.id) && !answeredNow.has(j.id)) {
      out.push({ invariant: 'no-phantom-job', message: `job ${short(j.id)} (${j.status}, submit ${j.submitKey}, dedupe ${j.dedupeKey}) exists but no enqueue answered its id` });
    }
  }

  // every answered job is still there (or pruned past retention), and nothing names a job that never was
  const pruned = new Set<string>();
  if (cutoffs) for (const [id, before] of model.jobs) if (!after.has(id) && Model.prunable(before, cutoffs)) pruned.add(id);
  for (const [id, how] of model.answered) {
    if (!after.has(id) && !model.pruned.has(id) && !pruned.has(id)) {
      out.push({ invariant: 'answered-job-survives', message: `job ${short(id)}, answered to ${how}, is gone` });
    }
  }
  for (const j of rows) {
    if (j.supersededBy !== null && !after.has(j.supersededBy) && !model.seen.has(j.supersededBy) && !answeredNow.has(j.supersededBy)) {
      const answeredTo = model.answered.get(j.id) ?? [...burst].find((a) => a.value?.job.id === j.id)?.key;
      out.push({
        invariant: 'answered-job-survives',
        message: `job ${short(j.id)}${answeredTo ? ` (answered to ${answeredTo})` : ''} is ${j.status}, superseded by ${short(j.supersededBy)}, a job that never existed`,
      });
    }
  }

  out.push(...checkUsage(model, model.usage(rows, now), 'after the round'));
  for (const s of samples) out.push(...checkUsage(model, s, 'during the round'));
  return out;
}

function checkOutcomes(model: Model, outcomes: Outcome[], after: Map<string, Job>): Violation[] {
  const out: Violation[] = [];
  const now = model.clock;
  const racesRescue = outcomes.some((o) => o.op.kind === 'claim' || o.op.kind === 'rescue');
  // jobs whose lease a settle in this round may have given back (so a claim may take them)
  const released = new Set(outcomes.filter((o) => o.op.kind === 'settle').map((o) => (o.op as Extract<Op, { kind: 'settle' }>).lease.jobId));
  const claimedBy = new Map<string, number>();

  for (const o of outcomes) {
    const op = o.op;
    const what = describeOp(op);
    if (o.error !== undefined) {
      if (op.kind === 'enqueue' && o.error instanceof ConflictError && op.input.submitKey) {
        const holder = model.holderOf(op.input.submitKey);
        const request = model.requests.get(op.input.submitKey);
        if (!holder) out.push({ invariant: 'submit-key', message: `${what}: 409 though no job holds submit key ${op.input.submitKey}: ${errorText(o.error)}` });
        else if (request && sameRequest(request, op.input)) {
          out.push({ invariant: 'resubmit-identical', message: `${what}: an identical resubmit of job ${short(holder.id)} (${holder.status}) answered 409: ${errorText(o.error)}` });
        }
        continue;
      }
      if (signalRefusalAllowed(model, op, o.error, after)) continue;
      if (op.kind === 'cancel' && o.error instanceof ConflictError) {
        const before = model.jobs.get(op.jobId);
        const rescued = before?.status === 'running' && before.lockedUntil !== null && before.lockedUntil.getTime() < now && racesRescue;
        const superseded = before?.dedupeKey != null && outcomes.some((x) => x.op.kind === 'enqueue' && x.op.input.dedupeKey === before.dedupeKey);
        // a parent's cancel in the same round may have cancelled this never-started child first
        const cascaded = outcomes.some((x) => (x.op.kind === 'cancel' && x !== o && model.flows.descends(op.jobId, x.op.jobId)) || bulkCancels(x.op));
        if (before && (before.status === 'queued' || before.status === 'running') && !released.has(op.jobId) && !rescued && !superseded && !cascaded) {
          out.push({ invariant: 'cancel', message: `${what}: 409 for a ${before.status} job: ${errorText(o.error)}` });
        }
        continue;
      }
      out.push({ invariant: 'unexpected-error', message: `${what}: ${errorText(o.error)}` });
      continue;
    }
    switch (op.kind) {
      case 'enqueue': {
        const r = o.value as EnqueueResult;
        const key = op.input.submitKey;
        if (key) {
          const holder = model.holderOf(key);
          const request = model.requests.get(key);
          if (holder && request && !sameRequest(request, op.input)) {
            out.push({ invariant: 'submit-key', message: `${what}: another request under submit key ${key} answered job ${short(r.job.id)} instead of a 409` });
          } else if (holder && (!r.duplicate || r.job.id !== holder.id)) {
            out.push({ invariant: op.resubmit ? 'resubmit-identical' : 'submit-key', message: `${what}: answered job ${short(r.job.id)} (duplicate ${r.duplicate}), but submit key ${key} belongs to job ${short(holder.id)}` });
          } else if (!holder && r.duplicate) {
            out.push({ invariant: 'submit-key', message: `${what}: answered a duplicate (job ${short(r.job.id)}) though no job held submit key ${key}` });
          }
        }
        if (!r.duplicate) {
          if (model.seen.has(r.job.id)) out.push({ invariant: 'submit-key', message: `${what}: answered existing job ${short(r.job.id)} as new` });
          if (r.superseded) {
            const old = after.get(r.superseded);
            if (old && (old.status !== 'cancelled' || old.supersededBy !== r.job.id)) {
              out.push({ invariant: 'dedupe', message: `${what}: said it superseded job ${short(r.superseded)}, which is ${old.status}, superseded_by ${short(old.supersededBy)}` });
            }
          }
        }
        break;
      }
      case 'batch': {
        const rs = o.value as Array<EnqueueResult>;
        if (rs.length !== op.inputs.length) out.push({ invariant: 'unexpected-error', message: `${what}: answered ${rs.length} jobs` });
        for (const r of rs) if (r.duplicate || model.seen.has(r.job.id)) out.push({ invariant: 'submit-key', message: `${what}: answered an existing job ${short(r.job.id)}` });
        break;
      }
      case 'claim': {
        const jobs = o.value as Job[];
        if (jobs.length > op.limit) out.push({ invariant: 'single-owner', message: `${what}: ${jobs.length} jobs for a limit of ${op.limit}` });
        for (const j of jobs) {
          if (j.pool !== null && j.pool !== op.pool) out.push({ invariant: 'routing', message: `${what}: took job ${short(j.id)} of pool ${j.pool}` });
          if (j.runAt.getTime() > now) out.push({ invariant: 'routing', message: `${what}: took job ${short(j.id)} due only at ${j.runAt.toISOString()}` });
          const other = claimedBy.get(j.id);
          if (other !== undefined) out.push({ invariant: 'single-owner', message: `${what}: job ${short(j.id)} was also claimed by c${other} in the same round` });
          claimedBy.set(j.id, op.client);
          const before = model.jobs.get(j.id);
          if (before && Model.live(before, now) && !released.has(j.id)) {
            out.push({ invariant: 'single-owner', message: `${what}: took job ${short(j.id)} while ${before.lockedBy} held a live lease until ${before.lockedUntil!.toISOString()}` });
          }
        }
        break;
      }
      case 'settle': {
        const before = model.jobs.get(op.lease.jobId);
        const current = before !== undefined && before.status === 'running' && before.leaseToken === op.lease.token;
        const expired = before?.lockedUntil ? before.lockedUntil.getTime() < now : false;
        const held = op.how === 'retry' ? (o.value as RetryOutcome) !== 'lost'
          : op.how === 'wait' || op.how === 'spawn' ? o.value !== null
          : op.how === 'rate_limited' ? o.value !== 'lost'
          : o.value === true;
        if (current && !(expired && racesRescue) && !held) {
          out.push({ invariant: 'fence', message: `${what}: the owner's settle matched nothing (lease until ${before!.lockedUntil?.toISOString()})` });
        }
        if (!current && held) {
          out.push({ invariant: 'fence', message: `${what}: a stale lease settled job ${short(op.lease.jobId)} (${before?.status ?? 'gone'}, now owned by ${before?.lockedBy ?? '-'})` });
        }
        if (op.how === 'retry' && held && before && current) {
          const expect = before.attempts >= before.maxAttempts ? 'failed' : 'queued';
          if (o.value !== expect) out.push({ invariant: 'fence', message: `${what}: retry at attempt ${before.attempts}/${before.maxAttempts} ended ${String(o.value)}, expected ${expect}` });
        }
        break;
      }
      case 'bulk': {
        const r = o.value as BulkCancelResult & BulkRequeueResult;
        const applied = op.action === 'cancel' ? r.cancelled + r.cancelRequested : r.requeued;
        if (applied + r.skipped !== r.matched || r.nextCursor !== null) {
          out.push({ invariant: 'bulk', message: `${what}: answered ${JSON.stringify(r)}: what it applied and skipped should add up to what it matched, and the walk should end` });
        }
        break;
      }
      case 'cancel': {
        const before = model.jobs.get(op.jobId);
        if (before && (before.status !== 'queued' && before.status !== 'running')) {
          out.push({ invariant: 'cancel', message: `${what}: cancelled a ${before.status} job` });
        }
        break;
      }
      default:
        break;
    }
  }
  return out;
}

/** Every client sent the same request under each burst key: one job per key, still queued. */
function checkBurst(model: Model, answers: BurstAnswer[], after: Map<string, Job>): Violation[] {
  const out: Violation[] = [];
  const byKey = new Map<string, BurstAnswer[]>();
  for (const a of answers) (byKey.get(a.key) ?? byKey.set(a.key, []).get(a.key)!).push(a);
  for (const [key, list] of byKey) {
    const errors = list.filter((a) => a.error !== undefined);
    for (const a of errors) {
      out.push({ invariant: a.error instanceof ConflictError ? 'resubmit-identical' : 'unexpected-error', message: `burst key ${key}, c${a.client}: ${errorText(a.error)}` });
    }
    const ok = list.filter((a) => a.value);
    const ids = new Set(ok.map((a) => a.value!.job.id));
    const fresh = ok.filter((a) => !a.value!.duplicate).length;
    if (ids.size > 1 || fresh > 1) out.push({ invariant: 'submit-key', message: `burst key ${key}: ${ok.length} identical enqueues answered ${ids.size} jobs, ${fresh} of them as new` });
    for (const id of ids) {
      const job = after.get(id);
      if (job && job.status !== 'queued') {
        const by = job.supersededBy;
        const exists = by !== null && (after.has(by) || model.seen.has(by));
        out.push({
          invariant: 'answered-job-survives',
          message: `burst key ${key} (submit key = dedupe key, ${ok.length} identical enqueues at once): the answered job ${short(id)} is ${job.status}` +
            (by ? `, superseded by ${short(by)}${exists ? '' : ', a job that never existed'}` : '') +
            `; queued jobs left for the key: ${[...after.values()].filter((j) => j.dedupeKey === key && j.status === 'queued').length}`,
        });
      }
    }
  }
  return out;
}

/**
 * The starvation probe: claims of size `limit` for `pool`, without settling, until one comes back
 * empty or `ceil(N/limit) + 2` were made (N: what the model found claimable at the start). After
 * them, the model must find nothing claimable left.
 */
export function checkStarvation(pool: string | null, limit: number, initial: Job[], sizes: number[], left: Job[]): Violation[] {
  if (left.length === 0) return [];
  const keys = [...new Set(left.map((j) => j.concurrencyKey ?? '(no key)'))].join(', ');
  return [{
    invariant: 'no-starvation',
    message: `claims of pool ${pool ?? '(none)'} with limit ${limit}: ${initial.length} claimable jobs at the start, claims took ${sizes.join(', ')}` +
      ` and stopped, leaving ${left.length} claimable (concurrency keys ${keys})`,
  }];
}

/** The event kinds that set a job's status, and the status they set. */
const STATUS_OF: Record<string, string> = {
  enqueued: 'queued', claimed: 'running', checkpoint: 'queued', retry: 'queued', done: 'done', failed: 'failed',
  lease_expired: 'queued', escalated: 'queued', oom_killed: 'oom_killed', cancelled: 'cancelled', superseded: 'cancelled',
  requeued: 'queued', lease_released: 'queued',
};

/**
 * Replays each job's retained events to its row. A history that still starts with `enqueued` is
 * whole (events are pruned oldest first) and goes through the engine's full replay
 * (scripts/lib/history.ts); a pruned one must still end in the row's status. superseded_by must
 * agree with the superseded event.
 */
export function checkReplay(rows: Job[], events: HistoryEvent[]): Violation[] {
  const out: Violation[] = [];
  const byJob = new Map<string, HistoryEvent[]>();
  for (const e of events) (byJob.get(e.job_id) ?? byJob.set(e.job_id, []).get(e.job_id)!).push(e);
  const whole = rows.filter((j) => byJob.get(j.id)?.[0]?.kind === 'enqueued');
  const report = replayHistory(
    whole.map((j) => ({ id: j.id, status: j.status, attempts: j.attempts, crashes: j.crashes, weight: j.weight, result: j.result, max_attempts: j.maxAttempts })),
    events.filter((e) => whole.some((j) => j.id === e.job_id)),
  );
  for (const p of report.problems) out.push({ invariant: 'history-replays', message: p });
  for (const j of rows) {
    const evs = byJob.get(j.id) ?? [];
    const superseded = evs.filter((e) => e.kind === 'superseded').at(-1);
    if (superseded && superseded.detail.by !== j.supersededBy) {
      out.push({ invariant: 'history-replays', message: `job ${short(j.id)}: superseded by ${short(superseded.detail.by)} in its events, ${short(j.supersededBy)} in its row` });
    }
    if (!superseded && evs[0]?.kind === 'enqueued' && j.supersededBy !== null) {
      out.push({ invariant: 'history-replays', message: `job ${short(j.id)}: superseded_by ${short(j.supersededBy)} without a superseded event` });
    }
    if (evs[0]?.kind !== 'enqueued') {
      const last = evs.filter((e) => STATUS_OF[e.kind]).at(-1);
      if (last && STATUS_OF[last.kind] !== j.status) {
        out.push({ invariant: 'history-replays', message: `job ${short(j.id)}: its last retained status event is ${last.kind}, its row is ${j.status}` });
      }
    }
  }
  return out;
}
