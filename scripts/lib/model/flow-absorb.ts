import type { Job, SignalAnswer } from '../../../queue/index.ts';
import type { Violation } from './checks.ts';
import type { FlowRound } from './flow-checks.ts';
import { isTerminal, RATE, RATED_TYPE } from './flows.ts';
import type { Model } from './model.ts';

/**
 * What the clients learnt in a round about the flows, after the round's checks: the events the
 * engine kept (and which a wait took), each spawn's children, the children that ended and the
 * joins that held, the rate key's starts and pauses, and the history the round wrote.
 */
export function absorbFlows(model: Model, r: FlowRound): void {
  const flows = model.flows;
  const now = model.clock;
  for (const o of r.outcomes) {
    const op = o.op;
    if ((op.kind === 'signal' || op.kind === 'event') && o.value) {
      const kept = (o.value as SignalAnswer).keptEventId;
      if (kept !== null) flows.kept.set(kept, { id: kept, n: op.n, name: op.name, key: op.key ?? '', jobId: op.kind === 'signal' ? op.jobId : null, at: now });
    }
    if (op.kind === 'claim' && o.value) {
      for (const j of o.value as Job[]) if (j.type === RATED_TYPE) flows.starts.push(now);
    }
    if (op.kind === 'settle' && op.how === 'rate_limited' && o.value === 'paused') {
      flows.pausedUntil = Math.max(flows.pausedUntil, now + op.delayMs);
      flows.pauses.push({ from: now, until: flows.pausedUntil });
    }
  }
  for (const e of r.fresh) {
    if (e.kind === 'requeued') flows.requeued.add(e.job_id);
    const keptId = e.detail.keptEventId as number | undefined;
    if (e.kind === 'signalled' && e.detail.delivered === true && keptId !== undefined) {
      flows.taken.add(keptId);
      flows.kept.delete(keptId);
    }
  }
  for (const [parentId, s] of r.spawned) {
    if (!s.children) continue;
    const children = s.given; // the order given: what ctx.children() must answer in
    const list = flows.families.get(parentId) ?? flows.families.set(parentId, []).get(parentId)!;
    list.push({ parentId, waitNo: s.settled.waitNo, children, need: s.settled.need, joinedAt: null });
    for (const c of children) if (!flows.parentOf.has(c)) flows.parentOf.set(c, parentId);
  }
  for (const fs of flows.families.values()) {
    for (const f of fs) for (const c of f.children) if (isTerminal(r.after.get(c))) flows.ended.add(c);
    const latest = fs.at(-1)!;
    if (latest.joinedAt === null && flows.endedOf(latest, r.after) >= latest.need) latest.joinedAt = now;
  }
  tally(model, r);
  flows.events.push(...r.fresh);
  if (r.fresh.length) flows.lastEventId = Math.max(flows.lastEventId, ...r.fresh.map((e) => e.id));
}

/** Which cases of the flows this round reached (before the round's state is absorbed into families). */
function tally(model: Model, r: FlowRound): void {
  const c = model.flows.coverage;
  const now = model.clock;
  const signals = r.outcomes.filter((o) => (o.op.kind === 'signal' || o.op.kind === 'event') && o.value);
  for (const o of r.outcomes) {
    if (o.op.kind === 'settle' && o.op.how === 'wait' && o.value) c.waits++;
    if (o.op.kind === 'settle' && o.op.how === 'spawn' && o.value) c.spawns++;
    if (o.op.kind === 'settle' && o.op.how === 'rate_limited' && o.value === 'paused') c.ratePauses++;
  }
  for (const o of signals) {
    const a = o.value as SignalAnswer;
    c.deliveries += a.delivered.length;
    if (a.keptEventId !== null) c.kept++;
  }
  const targets = signals.map((o) => (o.op.kind === 'signal' ? o.op.jobId : o.op.kind === 'event' ? `${o.op.name}/${o.op.key ?? ''}` : ''));
  if (new Set(targets).size < targets.length) c.racingSignals++;
  c.keptTaken += r.fresh.filter((e) => e.kind === 'signalled' && e.detail.keptEventId !== undefined).length;
  c.timedOut += r.timedOut.length;
  c.resumedReads += r.resumed.size;
  c.joins += r.fresh.filter((e) => e.kind === 'resumed').length;
  if (model.flows.startsInWindow(now) + r.outcomes.flatMap((o) => (o.op.kind === 'claim' && o.value ? (o.value as Job[]) : [])).filter((j) => j.type === RATED_TYPE).length >= RATE.limit) c.rateWindowFull++;
  for (const [parentId, fs] of model.flows.families) {
    const children = fs.flatMap((f) => f.children);
    if (children.some((id) => r.after.get(id)?.status === 'failed' && model.jobs.get(id)?.status !== 'failed')) c.childFailed++;
    const parent = r.after.get(parentId);
    if (!parent?.cancelRequestedAt || model.jobs.get(parentId)?.cancelRequestedAt) continue;
    if (children.some((id) => model.jobs.get(id)?.status === 'running')) c.parentCancelReachedRunning++;
    if (children.some((id) => r.after.get(id)?.finishedAt?.getTime() === now && !isTerminal(model.jobs.get(id)) && r.after.get(id)?.status !== 'cancelled')) c.childEndedAtParentCancel++;
  }
}

/**
 * After a prune: the kept events the engine dropped leave the model, each checked against the
 * prune's rule (worker.prune_signals): its job ended or is gone, so no wait can take it, or it was
 * kept at or before `cutoff` (now - keptSignalRetentionMs).
 */
export function absorbSignalPrune(model: Model, remaining: ReadonlySet<number>, rows: readonly Job[], cutoff: number): Violation[] {
  const live = new Map(rows.map((j) => [j.id, j]));
  const out: Violation[] = [];
  for (const [id, k] of model.flows.kept) {
    if (remaining.has(id)) continue;
    model.flows.kept.delete(id);
    const job = k.jobId === null ? undefined : live.get(k.jobId);
    const jobEnded = k.jobId !== null && (job === undefined || isTerminal(job));
    if (jobEnded || k.at <= cutoff) continue;
    out.push({ invariant: 'prune-drops-dead-events', message: `a prune dropped kept event #${k.n} (${id}, ${k.name}/${k.key || '-'}${k.jobId ? ` for ${k.jobId.slice(-12)}` : ''}), kept at ${k.at} after the cutoff ${cutoff}, its job live` });
  }
  return out;
}
