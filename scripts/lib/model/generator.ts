import type { BulkFilter, EnqueueInput, JoinCondition } from '../../../queue/index.ts';
import { EVENT_KEYS, EVENT_NAMES, openWait, QUIET_EVENT, RATED_TYPE, waitOf } from './flows.ts';
import { Model, type Lease } from './model.ts';

/**
 * The seeded generator of concurrent histories for the model-based test. A history is a list of
 * rounds; a round is a clock move plus a few operations that run at once, each on its own
 * connection (a client): enqueues with submit, dedupe and concurrency keys, identical resubmits,
 * batches of one key, claims, settles (done, continue, park, retry, cancelled, failed for good,
 * a wait for an event, a spawn of children with a join, a provider's 429 on the rate-limited
 * type), crashes, stale settles by crashed owners, cancels (of parents too), signals to a job and
 * events by (name, key) — several at once on one target —, rescues, prunes. Choices depend on the model (a client
 * settles a lease it holds), so a seed fixes every choice, while what the database answers under
 * concurrency may still differ from run to run.
 */

/** mulberry32: a small seeded PRNG. */
export class Rng {
  private state: number;
  constructor(seed: number) {
    this.state = seed >>> 0;
  }
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  }
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }
  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)]!;
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
}

/** The seed of history `n` of a run: independent streams from one printed seed. */
export function historySeed(seed: number, n: number): number {
  let h = (seed ^ 0x9e3779b9) >>> 0;
  h = Math.imul(h ^ (n + 1), 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

export type SettleHow = 'done' | 'continue' | 'park' | 'retry' | 'cancelled' | 'fail' | 'wait' | 'spawn' | 'rate_limited';

/** The wait a 'wait' settle ends its step in (resuming at step 'resumed'). */
export interface WaitChoice {
  name: string;
  key?: string;
  timeoutMs?: number;
}

/** The children a 'spawn' settle enqueues, and its join (resuming at step 'joined'). */
export interface SpawnChoice {
  children: EnqueueInput[];
  join: JoinCondition;
}

export type Op =
  | { kind: 'enqueue'; client: number; input: EnqueueInput; resubmit: boolean }
  | { kind: 'batch'; client: number; inputs: EnqueueInput[] }
  | { kind: 'claim'; client: number; pool: string | null; limit: number }
  | { kind: 'settle'; client: number; lease: Lease; how: SettleHow; delayMs: number; wait?: WaitChoice; spawn?: SpawnChoice }
  | { kind: 'crash'; client: number; lease: Lease }
  | { kind: 'cancel'; client: number; jobId: string }
  /** bulkCancel / bulkRequeue of a filter, in batches of `batchSize`. */
  | { kind: 'bulk'; client: number; action: 'cancel' | 'retry'; filter: BulkFilter; batchSize: number }
  /** A transaction that holds a job's row lock and changes nothing: a settle stalled between its statements. */
  | { kind: 'hold'; client: number; jobId: string }
  | { kind: 'rescue'; client: number }
  /** signalJob: the event `name` (payload {n}) to one job. */
  | { kind: 'signal'; client: number; jobId: string; name: string; key?: string; n: number }
  /** sendEvent: the event (name, key) (payload {n}) to every job waiting on it. */
  | { kind: 'event'; client: number; name: string; key?: string; n: number };

/** A bulk cancel: it may reach any job of the round (its filter is a time window, and cancels reach children). */
export const bulkCancels = (op: Op): boolean => op.kind === 'bulk' && op.action === 'cancel';

export type Round =
  /**
   * With `staged`, the ops start in order, each once the one before it waits for a lock or has
   * finished; a `hold` among them keeps its lock until every later op waits or has finished. An
   * interleaving that depends on lock waits is then the same on every run.
   */
  | { kind: 'ops'; advanceMs: number; ops: Op[]; staged?: boolean }
  /** Every client enqueues the same request (submit key = dedupe key) for each key, in order. */
  | { kind: 'burst'; advanceMs: number; keys: string[]; input: EnqueueInput }
  | { kind: 'prune'; advanceMs: number; finishedRetentionMs: number; failedRetentionMs: number; eventRetentionMs: number };

export interface GeneratorConfig {
  /** Clients that take part in ordinary rounds. */
  clients: number;
  submitKeys: readonly string[];
  dedupeKeys: readonly string[];
  /** Concurrency keys and the limit every job of the key is enqueued with. */
  keyLimits: Readonly<Record<string, number>>;
  /** Pools jobs are routed to (null: any runner). */
  pools: readonly (string | null)[];
  /** Keys per burst round. */
  burstKeys: number;
}

/** What earlier operations of a round aim at, so later ones of the round race them. */
interface RoundFocus {
  signal?: { jobId: string | null; name: string; key?: string };
  cancelledParent?: string;
}

export class HistoryGenerator {
  private bursts = 0;
  private texts = 0;
  private events = 0;

  constructor(readonly rng: Rng, readonly config: GeneratorConfig) {}

  /** A fresh request: each field drawn from a small space, so keys collide often. */
  input(): EnqueueInput {
    const { rng, config } = this;
    const input: EnqueueInput = {
      type: rng.chance(0.15) ? RATED_TYPE : 'uppercase',
      payload: { text: rng.pick(['a', 'b']) },
      priority: rng.pick([50, 50, 50, 10]),
      maxAttempts: rng.pick([2, 3]),
      pool: rng.pick(config.pools) ?? undefined,
      weight: rng.pick(['light', 'light', 'light', 'playwright', 'heavy']),
      delayMs: rng.pick([0, 0, 0, 20_000, 300_000]),
    };
    if (rng.chance(0.35)) input.submitKey = rng.pick(config.submitKeys);
    if (rng.chance(0.35)) input.dedupeKey = rng.pick(config.dedupeKeys);
    else if (input.submitKey && rng.chance(0.3)) input.dedupeKey = input.submitKey;
    if (rng.chance(0.45)) {
      input.concurrencyKey = rng.pick(Object.keys(config.keyLimits));
      input.concurrencyLimit = config.keyLimits[input.concurrencyKey];
    }
    return input;
  }

  /**
   * Several jobs of one concurrency key in one batch: a key's jobs side by side in the queue; a
   * third of them of the rate-limited type, so claims find more of it due than its window admits.
   */
  batch(): EnqueueInput[] {
    const { rng, config } = this;
    const key = rng.pick(Object.keys(config.keyLimits));
    const pool = rng.pick(config.pools) ?? undefined;
    const type = rng.chance(0.33) ? RATED_TYPE : 'uppercase';
    return Array.from({ length: rng.int(3, 6) }, () => ({
      type,
      payload: { text: `batch ${this.texts++}` },
      priority: 50,
      maxAttempts: 3,
      pool,
      weight: 'light',
      concurrencyKey: key,
      concurrencyLimit: config.keyLimits[key],
    }));
  }

  advance(): number {
    return this.rng.chance(0.25) ? this.rng.pick([1000, 4000, 15_000, 60_000, 130_000, 400_000]) : 0;
  }

  next(model: Model): Round {
    const { rng, config } = this;
    const r = rng.next();
    if (r < 0.04) {
      const n = this.bursts++;
      return {
        kind: 'burst',
        advanceMs: this.advance(),
        keys: Array.from({ length: config.burstKeys }, (_, i) => `burst-${n}-${i}`),
        input: { type: 'uppercase', payload: { text: 'burst' }, pool: 'burst', delayMs: 3_600_000 },
      };
    }
    if (r < 0.08) {
      return {
        kind: 'prune',
        advanceMs: this.advance(),
        finishedRetentionMs: rng.pick([60_000, 600_000]),
        failedRetentionMs: rng.pick([600_000, 3_600_000]),
        eventRetentionMs: rng.pick([60_000, 300_000, 3_600_000]),
      };
    }
    if (r < 0.16) {
      const race = this.race(model);
      if (race) return { kind: 'ops', advanceMs: 0, ops: race };
    }
    if (r < 0.19) {
      const staged = this.stagedRace(model);
      if (staged) return { kind: 'ops', advanceMs: 0, ops: staged, staged: true };
    }
    const ops: Op[] = [];
    const usedSubmitKeys = new Set<string>();
    const focus: RoundFocus = {};
    const clients = Array.from({ length: config.clients }, (_, i) => i);
    const count = rng.int(1, config.clients);
    for (let i = 0; i < count; i++) {
      const client = clients.splice(rng.int(0, clients.length - 1), 1)[0]!;
      const op = this.op(model, client, usedSubmitKeys, focus);
      if (op.kind === 'enqueue' && op.input.submitKey) usedSubmitKeys.add(op.input.submitKey);
      ops.push(op);
    }
    return { kind: 'ops', advanceMs: this.advance(), ops };
  }

  /** One client's operation, drawn by weight among those it can do now. */
  private op(model: Model, client: number, usedSubmitKeys: Set<string>, focus: RoundFocus): Op {
    const { rng } = this;
    const held = [...model.leasesOf(client).values()];
    const live = held.filter((l) => !l.zombie);
    const zombies = held.filter((l) => l.zombie);
    const resubmittable = [...model.requests.keys()].filter((k) => !usedSubmitKeys.has(k));
    const cancellable = [...model.jobs.values()].filter((j) => j.pool !== 'burst');
    const choices: Array<[number, () => Op]> = [
      [28, () => {
        let input = this.input();
        for (let i = 0; input.submitKey && usedSubmitKeys.has(input.submitKey) && i < 5; i++) input = this.input();
        if (input.submitKey && usedSubmitKeys.has(input.submitKey)) delete input.submitKey;
        return { kind: 'enqueue', client, input, resubmit: false };
      }],
      // an idempotent client retrying: exactly the request that holds the key
      [resubmittable.length ? 7 : 0, () => ({ kind: 'enqueue', client, input: model.requests.get(rng.pick(resubmittable))!, resubmit: true })],
      [9, () => ({ kind: 'batch', client, inputs: this.batch() })],
      [26, () => ({ kind: 'claim', client, pool: rng.pick(this.config.pools), limit: rng.pick([1, 1, 2, 3, 4]) })],
      [live.length || zombies.length ? 24 : 0, () => this.settle(model, client, live, zombies, focus)],
      [live.length ? 4 : 0, () => ({ kind: 'crash', client, lease: rng.pick(live) })],
      [cancellable.length ? 5 : 0, () => {
        const open = cancellable.filter((j) => j.status === 'queued' || j.status === 'running');
        // a parent with children still open: its cancel reaches them while they run and settle
        const parents = open.filter((j) => model.flows.families.has(j.id) && j.cancelRequestedAt === null);
        const target = parents.length && rng.chance(0.5) ? rng.pick(parents) : rng.pick(open.length && rng.chance(0.8) ? open : cancellable);
        if (model.flows.families.has(target.id)) focus.cancelledParent = target.id;
        return { kind: 'cancel', client, jobId: target.id };
      }],
      [2, () => ({ kind: 'rescue', client })],
      [8, () => this.signal(model, client, focus)],
      [cancellable.length ? 3 : 0, () => this.bulk(model, client, rng.chance(0.6) ? 'cancel' : 'retry')],
    ];
    let r = rng.next() * choices.reduce((sum, [w]) => sum + w, 0);
    for (const [w, make] of choices) {
      if (r < w) return make();
      r -= w;
    }
    return choices[0]![1]();
  }

  /**
   * A round built to race on one target: a parent's cancel against its child's settle (the child
   * ends at the moment of the cancel), two signals and an event at one waiting job, or a wait's
   * settle against an event on its channel. null when the model has no target for any.
   */
  private race(model: Model): Op[] | null {
    const { rng } = this;
    const holders = [...model.leases.entries()].flatMap(([client, held]) =>
      client < this.config.clients ? [...held.values()].filter((l) => !l.zombie && model.current(l)).map((lease) => ({ client, lease })) : []);
    const others = (busy: number[]) => Array.from({ length: this.config.clients }, (_, i) => i).filter((i) => !busy.includes(i));
    const n = () => ++this.events;
    const kinds: Array<() => Op[] | null> = [
      () => {
        const child = holders.filter(({ lease }) => {
          const parent = model.jobs.get(model.flows.parentOf.get(lease.jobId) ?? '');
          return parent && (parent.status === 'queued' || parent.status === 'running') && parent.cancelRequestedAt === null;
        });
        if (!child.length) return null;
        const { client, lease } = rng.pick(child);
        const how = rng.pick(['done', 'done', 'fail'] as const);
        return [{ kind: 'settle', client, lease, how, delayMs: 0 }, { kind: 'cancel', client: rng.pick(others([client])), jobId: model.flows.parentOf.get(lease.jobId)! }];
      },
      () => {
        const waiting = [...model.jobs.values()].filter((j) => openWait(j, model.clock));
        if (!waiting.length) return null;
        const job = rng.pick(waiting);
        const wait = openWait(job, model.clock)!;
        const [a, b, c] = others([]);
        return [
          { kind: 'signal', client: a!, jobId: job.id, name: wait.name, n: n() },
          { kind: 'signal', client: b!, jobId: job.id, name: wait.name, key: wait.key || undefined, n: n() },
          { kind: 'event', client: c!, name: wait.name, key: wait.key || undefined, n: n() },
        ];
      },
      () => {
        const free = holders.filter(({ lease }) => !model.jobs.get(lease.jobId)?.cancelRequestedAt);
        if (!free.length) return null;
        const { client, lease } = rng.pick(free);
        const wait: WaitChoice = { name: rng.pick(EVENT_NAMES), ...(rng.chance(0.5) ? { key: rng.pick(EVENT_KEYS) } : {}), ...(rng.chance(0.5) ? { timeoutMs: 1000 } : {}) };
        const [a, b] = others([client]);
        const ops: Op[] = [{ kind: 'settle', client, lease, how: 'wait', delayMs: 0, wait }, { kind: 'event', client: a!, name: wait.name, key: wait.key, n: n() }];
        if (rng.chance(0.5)) ops.push({ kind: 'signal', client: b!, jobId: lease.jobId, name: wait.name, n: n() });
        return ops;
      },
    ];
    const start = rng.int(0, kinds.length - 1);
    for (let i = 0; i < kinds.length; i++) {
      const ops = kinds[(start + i) % kinds.length]!();
      if (ops) return ops;
    }
    return null;
  }

  /**
   * A bulk operation over the jobs created in a window around one job's creation (a round's
   * enqueues share its pinned time, so a window holds a few jobs, parents and children among them).
   */
  private bulk(model: Model, client: number, action: 'cancel' | 'retry'): Op {
    const { rng } = this;
    const jobs = [...model.jobs.values()].filter((j) => j.pool !== 'burst');
    const pivot = rng.pick(jobs).createdAt.getTime();
    const before = rng.pick([1, 1, 5_000, 60_000]);
    const filter: BulkFilter = { createdAfter: new Date(pivot - rng.pick([0, 0, 5_000])), createdBefore: new Date(pivot + before) };
    if (rng.chance(0.5)) filter.type = 'uppercase';
    return { kind: 'bulk', client, action, filter, batchSize: rng.pick([1, 2, 500]) };
  }

  /**
   * A bulk cancel of parents against their children's settles, in the order that once
   * deadlocked: one child's row held (a settle stalled mid-transaction), the bulk cancel, then
   * the settle of a sibling that ends the join (it locks the sibling, then the parent).
   */
  private stagedRace(model: Model): Op[] | null {
    const { rng } = this;
    const byParent = new Map<string, Array<{ client: number; lease: Lease }>>();
    for (const [client, held] of model.leases) {
      if (client >= this.config.clients) continue;
      for (const lease of held.values()) {
        if (lease.zombie || !model.current(lease)) continue;
        const parentId = model.flows.parentOf.get(lease.jobId);
        const parent = parentId ? model.jobs.get(parentId) : undefined;
        if (!parent || (parent.status !== 'queued' && parent.status !== 'running') || parent.cancelRequestedAt) continue;
        (byParent.get(parentId!) ?? byParent.set(parentId!, []).get(parentId!)!).push({ client, lease });
      }
    }
    // the settle must end the join (so it locks the parent), and the held sibling must sort
    // before the settled child (so the bulk cancel's walk of the children waits there first)
    const open = (id: string) => ['queued', 'running'].includes(model.jobs.get(id)?.status ?? '');
    const endsJoin = (parentId: string) => {
      const family = model.flows.latestFamily(parentId);
      return family !== undefined && family.joinedAt === null && family.need - model.flows.endedOf(family, model.jobs) === 1;
    };
    const parents = [...byParent.keys()];
    if (!parents.length) return null;
    const preferred = parents.filter(endsJoin);
    const parentId = rng.pick(preferred.length ? preferred : parents);
    const parent = model.jobs.get(parentId)!;
    const { client, lease } = rng.pick(byParent.get(parentId)!);
    const siblings = (model.flows.families.get(parentId) ?? []).flatMap((f) => f.children).filter((id) => id !== lease.jobId && open(id));
    const held = siblings.find((id) => id < lease.jobId) ?? siblings[0];
    const free = Array.from({ length: this.config.clients }, (_, i) => i).filter((i) => i !== client);
    const [holder, bulker] = free;
    const at = parent.createdAt.getTime();
    const bulk: Op = {
      kind: 'bulk', client: bulker!, action: 'cancel', batchSize: rng.pick([1, 500]),
      filter: { type: parent.type, createdAfter: new Date(at), createdBefore: new Date(at + 1) },
    };
    const settle: Op = { kind: 'settle', client, lease, how: rng.pick(['done', 'done', 'fail'] as const), delayMs: 0 };
    return held ? [{ kind: 'hold', client: holder!, jobId: held }, bulk, settle] : [bulk, settle];
  }

  /** A settle of a lease the client holds (a zombie's, now and then); a child of a cancelled parent settles cancelled, as a runner that saw the request at its claim. */
  private settle(model: Model, client: number, live: Lease[], zombies: Lease[], focus: RoundFocus): Op {
    const { rng } = this;
    const parentLeases = focus.cancelledParent ? live.filter((l) => model.flows.parentOf.get(l.jobId) === focus.cancelledParent) : [];
    const lease = parentLeases.length ? rng.pick(parentLeases)
      : zombies.length && (rng.chance(0.3) || !live.length) ? rng.pick(zombies) : rng.pick(live);
    const job = model.jobs.get(lease.jobId);
    let how: SettleHow = rng.pick(['done', 'done', 'continue', 'continue', 'retry', 'retry', 'park', 'wait', 'wait', 'wait', 'spawn', 'spawn', 'fail'] as const);
    if (job?.type === RATED_TYPE && rng.chance(0.3)) how = 'rate_limited';
    if (job?.cancelRequestedAt && (model.flows.parentOf.has(job.id) || rng.chance(0.7))) how = 'cancelled';
    const op: Extract<Op, { kind: 'settle' }> = { kind: 'settle', client, lease, how, delayMs: rng.pick([0, 0, 10_000, 5_000]) };
    if (how === 'rate_limited') op.delayMs = rng.pick([2000, 12_000]);
    if (how === 'wait') {
      op.wait = { name: rng.pick(EVENT_NAMES) };
      if (rng.chance(0.6)) op.wait.key = rng.pick(EVENT_KEYS);
      if (rng.chance(0.5)) op.wait.timeoutMs = rng.pick([1000, 1000, 5000, 30_000]);
      // a wait no event was kept for, so its timeout has a chance to come first
      if (rng.chance(0.25)) op.wait = { name: QUIET_EVENT, timeoutMs: 1000 };
    }
    if (how === 'spawn') {
      const n = rng.int(1, 3);
      op.spawn = {
        children: Array.from({ length: n }, () => ({
          type: 'uppercase', payload: { text: `child ${this.texts++}` }, maxAttempts: rng.pick([1, 2]), pool: rng.pick(this.config.pools) ?? undefined,
        })),
        join: rng.pick(['all', 'all', 'first', rng.int(1, n)] as const),
      };
    }
    return op;
  }

  /** A signal to a job (mostly one waiting), or an event by (name, key); a second one in the round often aims at the first's target. */
  private signal(model: Model, client: number, focus: RoundFocus): Op {
    const { rng } = this;
    const n = ++this.events;
    if (focus.signal && rng.chance(0.6)) {
      const { jobId, name, key } = focus.signal;
      return jobId ? { kind: 'signal', client, jobId, name, key, n } : { kind: 'event', client, name, key, n };
    }
    const jobs = [...model.jobs.values()].filter((j) => j.pool !== 'burst');
    const waiting = jobs.filter((j) => openWait(j, model.clock));
    const open = jobs.filter((j) => j.status === 'queued' || j.status === 'running');
    let op: Op;
    if (rng.chance(0.5) && (waiting.length || open.length)) {
      const job = waiting.length && rng.chance(0.7) ? rng.pick(waiting) : open.length ? rng.pick(open) : rng.pick(jobs);
      const wait = waitOf(job);
      const name = wait && rng.chance(0.85) ? wait.name : rng.pick(EVENT_NAMES);
      const key = rng.chance(0.6) ? undefined : wait?.key && rng.chance(0.7) ? wait.key : rng.pick(EVENT_KEYS);
      op = { kind: 'signal', client, jobId: job.id, name, key, n };
    } else {
      // mostly on a channel someone waits on: an event nobody takes is kept, and the next wait on it ends at once
      const wait = waiting.length && rng.chance(0.85) ? waitOf(rng.pick(waiting)) : null;
      const name = wait?.name ?? rng.pick(EVENT_NAMES);
      const key = wait ? wait.key || undefined : rng.chance(0.3) ? undefined : rng.pick(EVENT_KEYS);
      op = { kind: 'event', client, name, key, n };
    }
    focus.signal = { jobId: op.kind === 'signal' ? op.jobId : null, name: op.name, key: op.key };
    return op;
  }
}

/** One line per round, for the trail printed with a failure. */
export function describeRound(round: Round): string {
  const clock = round.advanceMs ? `+${round.advanceMs / 1000}s ` : '';
  if (round.kind === 'burst') return `${clock}burst ${round.keys[0]}…(${round.keys.length} keys)`;
  if (round.kind === 'prune') {
    return `${clock}prune finished>${round.finishedRetentionMs / 1000}s failed>${round.failedRetentionMs / 1000}s events>${round.eventRetentionMs / 1000}s`;
  }
  return clock + (round.staged ? 'staged ' : '') + round.ops.map(describeOp).join(round.staged ? ' → ' : ' | ');
}

export function describeOp(op: Op): string {
  const id = (s: string) => s.slice(-6);
  switch (op.kind) {
    case 'enqueue': {
      const i = op.input;
      const keys = [i.submitKey && `s=${i.submitKey}`, i.dedupeKey && `d=${i.dedupeKey}`, i.concurrencyKey && `k=${i.concurrencyKey}`]
        .filter(Boolean).join(',');
      const rest = [i.pool && `pool=${i.pool}`, i.weight, i.priority !== undefined && `p${i.priority}`, `+${(i.delayMs ?? 0) / 1000}s`].filter(Boolean).join(' ');
      return `c${op.client} ${op.resubmit ? 'resubmit' : 'enqueue'}(${keys} ${rest})`;
    }
    case 'batch':
      return `c${op.client} batch(${op.inputs.length}× k=${op.inputs[0]!.concurrencyKey}${op.inputs[0]!.pool ? ` pool=${op.inputs[0]!.pool}` : ''})`;
    case 'claim':
      return `c${op.client} claim(${op.pool ?? 'no pool'}, ${op.limit})`;
    case 'settle': {
      const extra = op.wait ? ` ${op.wait.name}/${op.wait.key ?? '-'}${op.wait.timeoutMs ? ` ${op.wait.timeoutMs / 1000}s` : ''}`
        : op.spawn ? ` ${op.spawn.children.length} join=${op.spawn.join}` : op.how === 'rate_limited' ? ` ${op.delayMs / 1000}s` : '';
      return `c${op.client} ${op.lease.zombie ? 'stale ' : ''}${op.how}(${id(op.lease.jobId)}${extra})`;
    }
    case 'signal':
      return `c${op.client} signal(${id(op.jobId)}, ${op.name}/${op.key ?? '-'} #${op.n})`;
    case 'event':
      return `c${op.client} event(${op.name}/${op.key ?? '-'} #${op.n})`;
    case 'crash':
      return `c${op.client} crash(${id(op.lease.jobId)})`;
    case 'cancel':
      return `c${op.client} cancel(${id(op.jobId)})`;
    case 'bulk':
      return `c${op.client} bulk-${op.action}(${JSON.stringify(op.filter)}, batch ${op.batchSize})`;
    case 'hold':
      return `c${op.client} hold(${id(op.jobId)})`;
    case 'rescue':
      return `c${op.client} rescue`;
  }
}
