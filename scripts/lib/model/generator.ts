import type { EnqueueInput } from '../../../queue/index.ts';
import { Model, type Lease } from './model.ts';

/**
 * The seeded generator of concurrent histories for the model-based test. A history is a list of
 * rounds; a round is a clock move plus a few operations that run at once, each on its own
 * connection (a client): enqueues with submit, dedupe and concurrency keys, identical resubmits,
 * batches of one key, claims, settles (done, continue, park, retry, cancelled), crashes, stale
 * settles by crashed owners, cancels, rescues, prunes. Choices depend on the model (a client
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

export type SettleHow = 'done' | 'continue' | 'park' | 'retry' | 'cancelled';

export type Op =
  | { kind: 'enqueue'; client: number; input: EnqueueInput; resubmit: boolean }
  | { kind: 'batch'; client: number; inputs: EnqueueInput[] }
  | { kind: 'claim'; client: number; pool: string | null; limit: number }
  | { kind: 'settle'; client: number; lease: Lease; how: SettleHow; delayMs: number }
  | { kind: 'crash'; client: number; lease: Lease }
  | { kind: 'cancel'; client: number; jobId: string }
  | { kind: 'rescue'; client: number };

export type Round =
  | { kind: 'ops'; advanceMs: number; ops: Op[] }
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

export class HistoryGenerator {
  private bursts = 0;
  private texts = 0;

  constructor(readonly rng: Rng, readonly config: GeneratorConfig) {}

  /** A fresh request: each field drawn from a small space, so keys collide often. */
  input(): EnqueueInput {
    const { rng, config } = this;
    const input: EnqueueInput = {
      type: 'uppercase',
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

  /** Several jobs of one concurrency key in one batch: a key's jobs side by side in the queue. */
  batch(): EnqueueInput[] {
    const { rng, config } = this;
    const key = rng.pick(Object.keys(config.keyLimits));
    const pool = rng.pick(config.pools) ?? undefined;
    return Array.from({ length: rng.int(3, 6) }, () => ({
      type: 'uppercase',
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
    return this.rng.chance(0.25) ? this.rng.pick([1000, 15_000, 60_000, 130_000, 400_000]) : 0;
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
    const ops: Op[] = [];
    const usedSubmitKeys = new Set<string>();
    const clients = Array.from({ length: config.clients }, (_, i) => i);
    const count = rng.int(1, config.clients);
    for (let i = 0; i < count; i++) {
      const client = clients.splice(rng.int(0, clients.length - 1), 1)[0]!;
      const op = this.op(model, client, usedSubmitKeys);
      if (op.kind === 'enqueue' && op.input.submitKey) usedSubmitKeys.add(op.input.submitKey);
      ops.push(op);
    }
    return { kind: 'ops', advanceMs: this.advance(), ops };
  }

  /** One client's operation, drawn by weight among those it can do now. */
  private op(model: Model, client: number, usedSubmitKeys: Set<string>): Op {
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
      [live.length || zombies.length ? 22 : 0, () => {
        // a zombie is a crashed owner coming back: its settle must match nothing once the lease moved on
        const lease = zombies.length && (rng.chance(0.3) || !live.length) ? rng.pick(zombies) : rng.pick(live);
        let how: SettleHow = rng.pick(['done', 'done', 'continue', 'continue', 'retry', 'retry', 'park'] as const);
        if (model.jobs.get(lease.jobId)?.cancelRequestedAt && rng.chance(0.7)) how = 'cancelled';
        return { kind: 'settle', client, lease, how, delayMs: rng.pick([0, 0, 10_000, 5_000]) };
      }],
      [live.length ? 4 : 0, () => ({ kind: 'crash', client, lease: rng.pick(live) })],
      [cancellable.length ? 4 : 0, () => {
        const open = cancellable.filter((j) => j.status === 'queued' || j.status === 'running');
        return { kind: 'cancel', client, jobId: rng.pick(open.length && rng.chance(0.8) ? open : cancellable).id };
      }],
      [2, () => ({ kind: 'rescue', client })],
    ];
    let r = rng.next() * choices.reduce((sum, [w]) => sum + w, 0);
    for (const [w, make] of choices) {
      if (r < w) return make();
      r -= w;
    }
    return choices[0]![1]();
  }
}

/** One line per round, for the trail printed with a failure. */
export function describeRound(round: Round): string {
  const clock = round.advanceMs ? `+${round.advanceMs / 1000}s ` : '';
  if (round.kind === 'burst') return `${clock}burst ${round.keys[0]}…(${round.keys.length} keys)`;
  if (round.kind === 'prune') {
    return `${clock}prune finished>${round.finishedRetentionMs / 1000}s failed>${round.failedRetentionMs / 1000}s events>${round.eventRetentionMs / 1000}s`;
  }
  return clock + round.ops.map(describeOp).join(' | ');
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
    case 'settle':
      return `c${op.client} ${op.lease.zombie ? 'stale ' : ''}${op.how}(${id(op.lease.jobId)})`;
    case 'crash':
      return `c${op.client} crash(${id(op.lease.jobId)})`;
    case 'cancel':
      return `c${op.client} cancel(${id(op.jobId)})`;
    case 'rescue':
      return `c${op.client} rescue`;
  }
}
