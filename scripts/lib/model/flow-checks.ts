import { ConflictError, NotFoundError, type Job, type JobChildren, type SignalAnswer, type SpawnSettled, type WaitEvent, type WaitSettle } from '../../../queue/index.ts';
import type { HistoryEvent } from '../history.ts';
import type { Outcome, Violation } from './checks.ts';
import { isTerminal, matches, openWait, RATE, RATED_TYPE, waitOf, type Family, type Flows, type WaitSpec } from './flows.ts';
import { bulkCancels, type Op, type SpawnChoice } from './generator.ts';
import type { Model } from './model.ts';

/**
 * The promises of signals, child jobs and the rate key, checked after every round (against what
 * the model knew before it, what the engine answered, the rows and the history it wrote) and at
 * the end of a history (over every event read, pruned since or not).
 */

export type FlowInvariant =
  /** A signal answers one delivery or one kept event; an event, its deliveries or one kept event. */
  | 'signal-answer'
  /** An event is delivered only to an open wait on it, each wait takes one event, no event is delivered twice. */
  | 'wait-takes-one-event'
  /** An event kept because no wait took it is taken by the next wait on it. */
  | 'event-kept-for-wait'
  /** Every delivery an answer reports is in the job's history, and every delivery in history was answered. */
  | 'delivery-in-history'
  /** A waiting job is claimed only once an event, its timeout or a cancel ended the wait. */
  | 'wait-not-claimed'
  /** A wait claimed at its timeout resumes with the timed_out outcome. */
  | 'wait-timeout'
  /** A spawn parks its parent until the join holds, and the join wakes it once. */
  | 'join'
  /** The resumed parent reads each child's outcome as its row is. */
  | 'join-outcomes'
  /** A parent's cancel reaches its unfinished children; they end cancelled. */
  | 'cancel-reaches-children'
  /** No window of `per` holds more than `limit` step starts of the rate key. */
  | 'rate-window'
  /** A 429 pauses the key: no start of it before the pause ends, the job's attempt unspent. */
  | 'rate-pause'
  /** A prune drops a kept event only when no wait can take it (its job ended or is gone) or it is past its retention. */
  | 'prune-drops-dead-events';

/** What a round did, beyond the outcomes checks.ts sees. */
export interface FlowRound {
  outcomes: Outcome[];
  /** Claimed jobs whose wait had timed out, and what worker.end_timed_out_wait answered (the runner's first act). */
  timedOut: Array<{ jobId: string; event: WaitEvent | null }>;
  after: Map<string, Job>;
  /** The events this round wrote. */
  fresh: HistoryEvent[];
  /**
   * Per parent that spawned in this round: the spawn the database took (a stale owner's spawn of the
   * same parent in the same round is refused and not here), what it answered, and its children.
   */
  spawned: Map<string, { spawn: SpawnChoice; settled: SpawnSettled; children: JobChildren | null; given: string[] }>;
  /** Per parent claimed at its resume step: its children as ctx.children() reads them. */
  resumed: Map<string, JobChildren | null>;
  /** Rate-key starts in the window at moments sampled during the round. */
  rateSamples: number[];
}

const short = (id: string | null | undefined) => (id ? id.slice(-12) : String(id));
type SignalOp = Extract<Op, { kind: 'signal' | 'event' }>;
type SettleOp = Extract<Op, { kind: 'settle' }>;
const settles = (outcomes: Outcome[], how: string) =>
  outcomes.filter((o) => o.op.kind === 'settle' && o.op.how === how && o.error === undefined) as Array<Outcome & { op: SettleOp }>;

/** A signal's refusal the rules allow: 409 for a job that ended (or ends in the round), 404 for one that is gone. */
export function signalRefusalAllowed(model: Model, op: Op, error: unknown, after: Map<string, Job>): boolean {
  if (op.kind !== 'signal') return false;
  const before = model.jobs.get(op.jobId);
  const now = after.get(op.jobId);
  if (error instanceof NotFoundError) return now === undefined;
  return error instanceof ConflictError && (isTerminal(before) || isTerminal(now) || now === undefined);
}

export function checkFlowRound(model: Model, r: FlowRound): Violation[] {
  return [...checkSignals(model, r), ...checkClaims(model, r), ...checkChildren(model, r), ...checkRate(model, r)];
}

/** Whether an op of the round could end `job`'s wait or make it due: an event on it, or a cancel reaching it. */
function mayEndWait(model: Model, outcomes: Outcome[], jobId: string, wait: WaitSpec | null): boolean {
  return outcomes.some(({ op }) =>
    (op.kind === 'cancel' && model.flows.descends(jobId, op.jobId)) || bulkCancels(op) ||
    (wait !== null && op.kind === 'signal' && op.jobId === jobId && matches(wait, { name: op.name, key: op.key, forJob: true })) ||
    (wait !== null && op.kind === 'event' && matches(wait, { name: op.name, key: op.key, forJob: false })));
}

// Long because each answer is checked against the model and the history side by side.
function checkSignals(model: Model, r: FlowRound): Violation[] {
  const out: Violation[] = [];
  const flows = model.flows;
  const now = model.clock;
  const waits = new Map(settles(r.outcomes, 'wait').filter((o) => o.value != null).map((o) => [o.op.lease.jobId, o]));
  const keptNow = new Map<number, { n: number; jobId: string | null }>();
  const answered = new Map<string, number[]>(); // job → the n of each event delivered to it by an answer
  for (const o of r.outcomes) {
    if ((o.op.kind !== 'signal' && o.op.kind !== 'event') || o.error !== undefined) continue;
    const op = o.op as SignalOp;
    const a = o.value as SignalAnswer;
    const what = `${op.kind} #${op.n} (${op.name}/${op.key ?? '-'}${op.kind === 'signal' ? ` to ${short(op.jobId)}` : ''})`;
    const shaped = a.delivered.length === 0 ? a.keptEventId !== null
      : a.keptEventId === null && new Set(a.delivered).size === a.delivered.length && (op.kind === 'event' || (a.delivered.length === 1 && a.delivered[0] === op.jobId));
    if (!shaped) out.push({ invariant: 'signal-answer', message: `${what}: answered delivered ${JSON.stringify(a.delivered.map(short))}, kept ${a.keptEventId}` });
    if (a.keptEventId !== null) keptNow.set(a.keptEventId, { n: op.n, jobId: op.kind === 'signal' ? op.jobId : null });
    for (const id of a.delivered) {
      (answered.get(id) ?? answered.set(id, []).get(id)!).push(op.n);
      const event = { name: op.name, key: op.key, forJob: op.kind === 'signal' };
      const before = openWait(model.jobs.get(id), now);
      const settled = waits.get(id);
      const opened = settled?.value === 'waiting' && matches(waitSpecOf(settled.op), event);
      if (!(before && matches(before, event)) && !opened) {
        out.push({ invariant: 'wait-takes-one-event', message: `${what}: delivered to job ${short(id)}, which had no open wait on it (${describeWait(model.jobs.get(id))})` });
      }
    }
  }
  const delivered = r.fresh.filter((e) => e.kind === 'signalled' && e.detail.delivered === true);
  const perJob = new Map<string, HistoryEvent[]>();
  for (const e of delivered) (perJob.get(e.job_id) ?? perJob.set(e.job_id, []).get(e.job_id)!).push(e);
  for (const [id, evs] of perJob) {
    if (evs.length > 1) out.push({ invariant: 'wait-takes-one-event', message: `job ${short(id)}: ${evs.length} events delivered in one round (#${evs.map((e) => e.detail.payload?.n).join(', #')})` });
  }
  for (const e of delivered) {
    const n = e.detail.payload?.n;
    const keptId = e.detail.keptEventId as number | undefined;
    if (keptId !== undefined) {
      const kept = flows.kept.get(keptId) ?? keptNow.get(keptId);
      if (!kept || flows.taken.has(keptId)) out.push({ invariant: 'wait-takes-one-event', message: `job ${short(e.job_id)}: took kept event ${keptId}, which ${flows.taken.has(keptId) ? 'was taken before' : 'no answer kept'}` });
      else if (kept.n !== n) out.push({ invariant: 'delivery-in-history', message: `job ${short(e.job_id)}: kept event ${keptId} was #${kept.n}, its delivery says #${n}` });
      if (waits.get(e.job_id)?.value !== 'signalled') out.push({ invariant: 'delivery-in-history', message: `job ${short(e.job_id)}: took kept event ${keptId} but its wait settle answered ${waits.get(e.job_id)?.value ?? 'nothing'}` });
    } else if (!answered.get(e.job_id)?.includes(n)) {
      out.push({ invariant: 'delivery-in-history', message: `job ${short(e.job_id)}: history delivers event #${n}, which no answer delivered to it` });
    }
  }
  for (const [id, ns] of answered) {
    for (const n of ns) {
      if (!perJob.get(id)?.some((e) => e.detail.payload?.n === n)) out.push({ invariant: 'delivery-in-history', message: `event #${n} was answered delivered to job ${short(id)}, but its history has no such signalled event` });
    }
  }
  for (const [id, o] of waits) {
    const spec = waitSpecOf(o.op);
    if (o.value === 'signalled' && !perJob.get(id)?.some((e) => e.detail.keptEventId !== undefined)) {
      out.push({ invariant: 'delivery-in-history', message: `job ${short(id)}: its wait settle answered signalled, but no kept event's delivery is in its history` });
    }
    if (o.value !== 'waiting') continue;
    // an event kept before this round that only this wait could take
    const mine = [...flows.kept.values()].filter((k) => k.jobId === id && k.name === spec.name && (k.key === '' || k.key === spec.key));
    const channel = [...flows.kept.values()].filter((k) => k.jobId === null && k.name === spec.name && k.key === spec.key);
    const rivals = [...waits.values()].filter((w) => w !== o && waitSpecOf(w.op).name === spec.name && waitSpecOf(w.op).key === spec.key).length;
    if (mine.length || channel.length > rivals) {
      const k = mine[0] ?? channel[0]!;
      out.push({ invariant: 'event-kept-for-wait', message: `job ${short(id)}: its wait on ${spec.name}/${spec.key || '-'} answered waiting, though event #${k.n} (kept ${k.id}${k.jobId ? ' for this job' : ''}) waited for it` });
    }
  }
  for (const t of r.timedOut) {
    // an operator's requeue runs a job again from its checkpoint: the wait it was cancelled in ends timed out
    if (flows.requeuedIn({ parentId: t.jobId, children: [] }, r.fresh)) continue;
    const spec = waitOf(model.jobs.get(t.jobId));
    const e = t.event;
    if (!spec || !e || e.outcome !== 'timed_out' || e.name !== spec.name || (e.key ?? '') !== spec.key || spec.timeoutAt === null || spec.timeoutAt > now) {
      out.push({ invariant: 'wait-timeout', message: `job ${short(t.jobId)} claimed at its wait (${describeWait(model.jobs.get(t.jobId))}): the wait ended ${JSON.stringify(e)}` });
    }
  }
  return out;
}

function waitSpecOf(op: SettleOp): WaitSpec {
  return { name: op.wait!.name, key: op.wait!.key ?? '', step: 'resumed', timeoutAt: op.wait!.timeoutMs ?? null };
}

function describeWait(job: Job | undefined): string {
  if (!job) return 'gone';
  const w = waitOf(job);
  return w ? `waiting on ${w.name}/${w.key || '-'} until ${w.timeoutAt === null ? 'signalled' : new Date(w.timeoutAt).toISOString()}${job.cancelRequestedAt ? ', cancel pending' : ''}`
    : `${job.status} at ${job.step}${job.checkpoint.$event ? ` with event ${JSON.stringify(job.checkpoint.$event)}` : ''}`;
}

/** What a claim may not take: a job waiting on an event, a parent whose join does not hold, the rate key past its room or paused. */
function checkClaims(model: Model, r: FlowRound): Violation[] {
  const out: Violation[] = [];
  const flows = model.flows;
  const now = model.clock;
  for (const o of r.outcomes) {
    if (o.op.kind !== 'claim' || !o.value) continue;
    for (const j of o.value as Job[]) {
      const before = model.jobs.get(j.id);
      const wait = openWait(before, now);
      if (wait && !mayEndWait(model, r.outcomes, j.id, wait) && !flows.requeuedIn({ parentId: j.id, children: [] }, r.fresh)) {
        out.push({ invariant: 'wait-not-claimed', message: `c${o.op.client} claimed job ${short(j.id)} while it waited (${describeWait(before)})` });
      }
      const family = flows.latestFamily(j.id);
      if (family && family.joinedAt === null && !flows.requeuedIn(family, r.fresh) && before?.status === 'queued' && before.step === 'joined' && before.cancelRequestedAt === null &&
          flows.endedOf(family, r.after) < family.need && !mayEndWait(model, r.outcomes, j.id, null)) {
        out.push({ invariant: 'join', message: `c${o.op.client} claimed parent ${short(j.id)} with ${flows.endedOf(family, r.after)} of the ${family.need} children its join needs ended` });
      }
    }
  }
  return out;
}

// Long because the join, its outcomes and the cancel's reach are one family's checks.
function checkChildren(model: Model, r: FlowRound): Violation[] {
  const out: Violation[] = [];
  const flows = model.flows;
  const now = model.clock;
  for (const [parentId, { spawn, settled, children, given }] of r.spawned) {
    const total = spawn.children.length;
    const need = spawn.join === 'all' ? total : spawn.join === 'first' ? 1 : spawn.join;
    if (settled.total !== total || settled.created !== total || settled.need !== need || children?.children.length !== total) {
      out.push({ invariant: 'join', message: `spawn of ${total} children (join ${spawn.join}) by ${short(parentId)}: answered ${JSON.stringify(settled)}, ${children?.children.length ?? 'no'} children read` });
    } else if (children.children.some((c, i) => c.id !== given[i])) {
      out.push({ invariant: 'join-outcomes', message: `spawn by ${short(parentId)}: its children read ${children.children.map((c) => short(c.id)).join(',')}, given in the order ${given.map(short).join(',')}` });
    }
  }
  // the latest wait of each parent; a parent that spawned again in this round has a new one
  const families: Family[] = [...flows.families.values()].map((fs) => fs.at(-1)!).filter((f) => !r.spawned.has(f.parentId));
  for (const [parentId, s] of r.spawned) {
    if (s.children) families.push({ parentId, waitNo: s.settled.waitNo, children: s.given, need: s.settled.need, joinedAt: null });
  }
  for (const f of families) {
    const parent = r.after.get(f.parentId);
    if (!parent || isTerminal(parent) || f.joinedAt !== null || flows.requeuedIn(f, r.fresh)) continue;
    const ended = flows.endedOf(f, r.after);
    const parked = parent.status === 'queued' && parent.step === 'joined' && parent.runAt.getTime() > now;
    if (ended < f.need && parent.status === 'queued' && parent.step === 'joined' && parent.cancelRequestedAt === null && !parked) {
      out.push({ invariant: 'join', message: `parent ${short(f.parentId)} is due at ${parent.runAt.toISOString()} with ${ended} of the ${f.need} children its join needs ended` });
    }
    if (ended >= f.need && parked) {
      out.push({ invariant: 'join', message: `parent ${short(f.parentId)} still parked with ${ended} of ${f.need} children ended: the join never woke it` });
    }
    if (ended >= f.need && parent.cancelRequestedAt === null && (parent.step === 'joined' || parent.status !== 'queued')) {
      const resumed = [...flows.events, ...r.fresh].filter((e) => e.job_id === f.parentId && e.kind === 'resumed' && e.detail.children?.wait === f.waitNo);
      if (resumed.length !== 1) out.push({ invariant: 'join', message: `parent ${short(f.parentId)}: ${resumed.length} resumed events for wait ${f.waitNo} once its join held` });
    }
  }
  for (const [parentId, read] of r.resumed) {
    const f = flows.latestFamily(parentId);
    if (!f) continue;
    const ids = read?.children.map((c) => c.id) ?? [];
    const wrong = read?.children.filter((c) => c.status !== (r.after.get(c.id)?.status ?? 'pruned')) ?? [];
    if (JSON.stringify(ids) !== JSON.stringify(f.children) || wrong.length) {
      out.push({ invariant: 'join-outcomes', message: `parent ${short(parentId)} resumed and read children ${ids.map(short).join(',')} (${wrong.map((c) => `${short(c.id)} ${c.status} but its row is ${r.after.get(c.id)?.status ?? 'gone'}`).join('; ') || 'in another order'}), spawned ${f.children.map(short).join(',')}` });
    }
  }
  for (const [parentId, fs] of flows.families) {
    const parent = r.after.get(parentId);
    const cancelAt = parent?.cancelRequestedAt?.getTime();
    if (cancelAt === undefined || fs.some((f) => flows.requeuedIn(f, r.fresh))) continue;
    const first = model.jobs.get(parentId)?.cancelRequestedAt == null;
    for (const c of fs.flatMap((f) => f.children)) {
      const row = r.after.get(c);
      if (!row) continue;
      if (first && (model.jobs.get(c)?.status === 'running' || row.status === 'running')) flows.runningAtCancel.add(c);
      if (!isTerminal(row)) {
        if (row.cancelRequestedAt === null || (row.status === 'queued' && row.startedAt === null)) {
          out.push({ invariant: 'cancel-reaches-children', message: `child ${short(c)} of cancelled parent ${short(parentId)} is ${row.status}${row.startedAt ? '' : ', never started,'} with no cancel request` });
        } else if (first && row.status === 'queued' && row.runAt.getTime() > now) {
          out.push({ invariant: 'cancel-reaches-children', message: `child ${short(c)} of cancelled parent ${short(parentId)} has its cancel request but is due only at ${row.runAt.toISOString()}: its hook would not run` });
        }
      } else if ((row.status === 'done' || (row.status === 'failed' && !/lease/.test(row.lastError ?? ''))) && row.finishedAt!.getTime() > cancelAt && !flows.runningAtCancel.has(c)) {
        out.push({ invariant: 'cancel-reaches-children', message: `child ${short(c)} of parent ${short(parentId)} (cancelled at ${new Date(cancelAt).toISOString()}) ended ${row.status} after it, though no step of it was running then` });
      }
    }
  }
  return out;
}

function checkRate(model: Model, r: FlowRound): Violation[] {
  const out: Violation[] = [];
  const flows = model.flows;
  const now = model.clock;
  const rated = r.outcomes.flatMap((o) => (o.op.kind === 'claim' && o.value ? (o.value as Job[]).filter((j) => j.type === RATED_TYPE) : []));
  if (rated.length && flows.pausedUntil > now) {
    out.push({ invariant: 'rate-pause', message: `claims started ${rated.length} steps of ${RATE.key} while a 429 paused it until ${new Date(flows.pausedUntil).toISOString()}` });
  }
  const inWindow = flows.startsInWindow(now) + rated.length;
  if (inWindow > RATE.limit) out.push({ invariant: 'rate-window', message: `${inWindow} starts of ${RATE.key} in the ${RATE.perMs / 1000} s ending now (limit ${RATE.limit}; ${rated.length} in this round)` });
  for (const n of r.rateSamples) {
    if (n > RATE.limit) out.push({ invariant: 'rate-window', message: `during the round: ${n} claimed events of ${RATE.key} in the last ${RATE.perMs / 1000} s (limit ${RATE.limit})` });
  }
  const paused = settles(r.outcomes, 'rate_limited');
  const until = Math.max(flows.pausedUntil, ...paused.filter((o) => o.value === 'paused').map((o) => now + o.op.delayMs));
  for (const o of paused) {
    const before = model.jobs.get(o.op.lease.jobId);
    const row = r.after.get(o.op.lease.jobId);
    if (o.value === 'no_key') out.push({ invariant: 'rate-pause', message: `a 429 of ${short(o.op.lease.jobId)} (type ${before?.type}) answered no_key` });
    if (o.value !== 'paused' || !before || !row) continue;
    const wrong = row.status !== 'queued' ? `is ${row.status}` : row.attempts !== before.attempts - 1 ? `has attempts ${row.attempts} after ${before.attempts} (spent)`
      // a cancel makes the job due at once, for its hook
      : row.cancelRequestedAt === null && (row.runAt.getTime() < now + o.op.delayMs || row.runAt.getTime() > until) ? `is due at ${row.runAt.toISOString()}, not when the pause ends` : null;
    if (wrong) out.push({ invariant: 'rate-pause', message: `a 429 (retry after ${o.op.delayMs / 1000} s) of ${short(row.id)}: the job ${wrong}` });
  }
  return out;
}

/**
 * Over the whole history read (flows.events, pruned or not): every closed window of `per` holds
 * at most `limit` starts of the rate key and none falls inside a pause; between a wait and the
 * job's next claim, at most one event is delivered, and a claim with none comes at the timeout
 * (then the wait ends timed out) or after a cancel.
 */
export function checkFlowHistory(flows: Flows, ratedIds: Set<string>): Violation[] {
  const out: Violation[] = [];
  const starts = flows.events.filter((e) => e.kind === 'claimed' && ratedIds.has(e.job_id)).map((e) => e.at.getTime()).sort((a, b) => a - b);
  for (let i = 0, j = 0; i < starts.length; i++) {
    while (j < starts.length && starts[j]! <= starts[i]! + RATE.perMs) j++;
    if (j - i > RATE.limit) {
      out.push({ invariant: 'rate-window', message: `history: ${j - i} claimed events of ${RATE.key} from ${new Date(starts[i]!).toISOString()} within ${RATE.perMs / 1000} s (limit ${RATE.limit})` });
      break;
    }
  }
  const inPause = starts.find((t) => flows.pauses.some((p) => p.from < t && t < p.until));
  if (inPause !== undefined) out.push({ invariant: 'rate-pause', message: `history: a step of ${RATE.key} started at ${new Date(inPause).toISOString()}, inside a 429's pause` });
  const byJob = new Map<string, HistoryEvent[]>();
  for (const e of flows.events) (byJob.get(e.job_id) ?? byJob.set(e.job_id, []).get(e.job_id)!).push(e);
  for (const [id, evs] of byJob) {
    let wait: { timeoutAt: number | null; deliveries: number; cancelled: boolean } | null = null;
    for (let i = 0; i < evs.length; i++) {
      const e = evs[i]!;
      if (e.kind === 'cancel_requested' && wait) wait.cancelled = true;
      if (e.kind === 'requeued') wait = null;
      if (e.kind === 'waiting') wait = { timeoutAt: e.detail.timeoutAt ? new Date(e.detail.timeoutAt).getTime() : null, deliveries: 0, cancelled: evs.slice(0, i).some((x) => x.kind === 'cancel_requested') };
      if (e.kind === 'signalled' && e.detail.delivered === true) {
        if (!wait) out.push({ invariant: 'wait-takes-one-event', message: `history of ${short(id)}: event #${e.detail.payload?.n} delivered with no wait open` });
        else if (++wait.deliveries > 1) out.push({ invariant: 'wait-takes-one-event', message: `history of ${short(id)}: a second event (#${e.detail.payload?.n}) delivered to one wait` });
      }
      if (e.kind !== 'claimed' || !wait) continue;
      if (wait.deliveries === 0 && !wait.cancelled) {
        if (wait.timeoutAt === null || e.at.getTime() < wait.timeoutAt) out.push({ invariant: 'wait-not-claimed', message: `history of ${short(id)}: claimed at ${e.at.toISOString()} while waiting (timeout ${wait.timeoutAt === null ? 'none' : new Date(wait.timeoutAt).toISOString()}), no event delivered` });
        else {
          // a cancel request, or a signal kept for later (the job was running), may come between
          const then = evs.slice(i + 1).find((x) => x.kind !== 'cancel_requested' && !(x.kind === 'signalled' && x.detail.delivered !== true));
          if (then && then.kind !== 'wait_timed_out') out.push({ invariant: 'wait-timeout', message: `history of ${short(id)}: claimed at its wait's timeout, then ${then.kind}, not wait_timed_out` });
        }
      }
      wait = null;
    }
  }
  return out;
}
