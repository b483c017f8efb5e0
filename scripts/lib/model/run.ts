import {
  bulkCancel, bulkRequeue, cancelJob, claimJobs, completeJob, continueJob, endTimedOutWait, enqueue, enqueueBatch, failJob, jobChildren, pruneFinished,
  rescueExpiredLeases, retryJob, sendEvent, settleCancelled, settleWait, signalJob, spawn, spawnChildren, waitFor,
  type EnqueueResult, type Job, type JobChildren, type SpawnSettled, type Sql, type WaitEvent,
} from '../../../queue/index.ts';
import { settleRateLimitedRow } from '../../../queue/driver/flow-control.ts';
import { allEvents, allJobs, keptSignalEventIds, leaseMsOf, setPoolCapacity, truncateEngineTables, weightCosts } from '../../../queue/driver/tables.ts';
import { waitStateOf } from '../../../queue/signals/wait.ts';
import { historyEvent, type HistoryEvent } from '../history.ts';
import { runStaged } from '../lock-stages.ts';
import {
  checkReplay, checkRound, checkStarvation, type BurstAnswer, type Invariant, type Outcome, type UsageSample, type Violation,
} from './checks.ts';
import { checkFlowHistory, checkFlowRound, type FlowRound } from './flow-checks.ts';
import { absorbFlows, absorbSignalPrune } from './flow-absorb.ts';
import { COVERAGE, modelRegistry, RATE, RATED_TYPE, type CoverageCase } from './flows.ts';
import { describeRound, historySeed, HistoryGenerator, Rng, type Op, type Round } from './generator.ts';
import { Model, type ModelConfig, type PruneCutoffs } from './model.ts';

/**
 * The driver of the model-based test: runs seeded histories of concurrent rounds against a real
 * database through the engine's TypeScript API, reads the table after every round, checks it
 * (checks.ts) against the model (model.ts), and at the end of each history probes for starvation,
 * resubmits every submit key before and after pruning all events, and replays every history.
 */

export interface ModelRunOptions {
  seed: number;
  /** Histories to run (default: until `untilMs`). */
  histories?: number;
  /** Stop starting histories after this wall-clock time (ms since the epoch). */
  untilMs?: number;
  /** Rounds per history. */
  rounds?: number;
  /** Clients of ordinary rounds, each on its own connection. */
  clients?: number;
  /** Clients of a burst round (identical enqueues at once). */
  burstClients?: number;
  /** Keys per burst round. */
  burstKeys?: number;
  log?: (line: string) => void;
}

export interface Failure extends Violation {
  seed: number;
  history: number;
  round: number;
  /** The last rounds before the violation. */
  trail: string[];
}

export interface ModelRunReport {
  seed: number;
  histories: number;
  rounds: number;
  operations: number;
  /** The first failure of each invariant in each history. */
  failures: Failure[];
  /** How often the histories reached each case of signals, children and the rate key. */
  coverage: Record<CoverageCase, number>;
}

const T0 = Date.UTC(2030, 0, 1);
// in GB, what the classes cost (light 3, playwright 6, heavy 8): a runs a heavy and a light job, or three
// light; b one heavy, or a playwright, or two light
const POOLS = [{ name: 'a', maxRunningWeight: 11 }, { name: 'b', maxRunningWeight: 8 }];
const KEY_LIMITS = { k0: 1, k1: 1, k2: 1, k3: 1, k4: 1, k5: 2, k6: 2 };
const DAY_MS = 86_400_000;

export async function runModelHistories(sql: Sql, connectClient: () => Sql, options: ModelRunOptions): Promise<ModelRunReport> {
  const rounds = options.rounds ?? 60;
  const clientCount = options.clients ?? 4;
  const burstClients = Math.max(clientCount, options.burstClients ?? 8);
  const log = options.log ?? (() => {});
  const clients = Array.from({ length: burstClients }, () => connectClient());

  for (const p of POOLS) await setPoolCapacity(sql, p.name, p.maxRunningWeight);
  await modelRegistry.sync(sql);
  const weightCost = await weightCosts(sql);
  const leaseMs = await leaseMsOf(sql, 'uppercase');
  if (leaseMs === null) throw new Error('the uppercase type is not synced: sync the registry before a model run');
  const config: ModelConfig = { pools: POOLS, keyLimits: KEY_LIMITS, weightCost, leaseMs };

  const report: ModelRunReport = {
    seed: options.seed, histories: 0, rounds: 0, operations: 0, failures: [], coverage: Object.fromEntries(COVERAGE.map((c) => [c, 0])) as Record<CoverageCase, number>,
  };
  try {
    for (let h = 0; options.histories === undefined || h < options.histories; h++) {
      if (options.untilMs !== undefined && Date.now() >= options.untilMs) break;
      await truncateEngineTables(sql);
      const history = new History(sql, clients, config, options.seed, h, {
        clients: clientCount,
        submitKeys: ['s0', 's1', 's2', 's3', 's4'],
        dedupeKeys: ['d0', 'd1', 'd2'],
        keyLimits: KEY_LIMITS,
        pools: [null, null, 'a', 'b'],
        burstKeys: options.burstKeys ?? 20,
      }, report);
      await history.run(rounds);
      report.histories++;
      for (const c of COVERAGE) report.coverage[c] += history.model.flows.coverage[c];
      const mine = report.failures.filter((f) => f.history === h);
      log(`history ${h}: ${history.roundNo} rounds${mine.length ? `, violated ${[...new Set(mine.map((f) => f.invariant))].join(', ')}` : ''}`);
    }
  } finally {
    await Promise.all(clients.map((c) => c.end({ timeout: 5 })));
  }
  return report;
}

class History {
  readonly model: Model;
  readonly rng: Rng;
  readonly generator: HistoryGenerator;
  roundNo = 0;
  private trail: string[] = [];
  private failed = new Set<Invariant>();
  /** Every job of the rate-limited type the history made (its claimed events are the key's starts). */
  readonly ratedIds = new Set<string>();

  constructor(
    readonly sql: Sql,
    readonly clients: Sql[],
    config: ModelConfig,
    readonly seed: number,
    readonly index: number,
    generatorConfig: ConstructorParameters<typeof HistoryGenerator>[1],
    readonly report: ModelRunReport,
  ) {
    this.model = new Model(config, T0);
    this.rng = new Rng(historySeed(seed, index));
    this.generator = new HistoryGenerator(this.rng, generatorConfig);
  }

  async run(rounds: number): Promise<void> {
    for (let r = 0; r < rounds; r++) {
      await this.round(this.generator.next(this.model));
      if (r % 10 === 9) await this.probeStarvation();
    }
    await this.probeStarvation();
    await this.resubmitAll();
    await this.replay();
    this.record(checkFlowHistory(this.model.flows, this.ratedIds));
    await this.round({ kind: 'prune', advanceMs: 0, finishedRetentionMs: 30 * DAY_MS, failedRetentionMs: 30 * DAY_MS, eventRetentionMs: 0 });
    await this.resubmitAll();
    await this.replay();
  }

  private record(violations: Violation[]): void {
    for (const v of violations) {
      if (this.failed.has(v.invariant)) continue;
      this.failed.add(v.invariant);
      this.report.failures.push({ ...v, seed: this.seed, history: this.index, round: this.roundNo, trail: this.trail.slice(-12) });
    }
  }

  /** Run one round at once on its clients, sample usage meanwhile, read the table, check, sync. */
  async round(round: Round): Promise<Outcome[]> {
    const model = this.model;
    model.clock += round.advanceMs;
    const now = model.now();
    this.roundNo++;
    this.report.rounds++;
    this.trail.push(`#${this.roundNo} ${describeRound(round)}`);

    const samples: UsageSample[] = [];
    const rateSamples: number[] = [];
    // the key's window is sampled while claims run and a job of the key is due
    const claims = round.kind === 'ops' && round.ops.some((op) => op.kind === 'claim') &&
      [...model.jobs.values()].some((j) => j.type === RATED_TYPE && j.status === 'queued' && j.runAt.getTime() <= model.clock);
    let busy = true;
    const sampler = (async () => {
      while (busy) {
        samples.push(await this.sample(now));
        if (claims) rateSamples.push(await this.sampleRate(now));
      }
    })();
    let outcomes: Outcome[] = [];
    let burst: BurstAnswer[] = [];
    let cutoffs: PruneCutoffs | undefined;
    let keptCutoff: number | null = null; // set by a prune: kept events at or before it may be gone
    const timedOut: FlowRound['timedOut'] = [];
    try {
      if (round.kind === 'ops') {
        this.report.operations += round.ops.length;
        outcomes = round.staged ? await this.staged(round.ops, now, timedOut)
          : await Promise.all(round.ops.map((op) => execute(this.clients[op.client]!, op, now, timedOut).then(
            (value) => ({ op, value }), (error: unknown) => ({ op, error }))));
      } else if (round.kind === 'burst') {
        // every client walks the keys in the same order, so their enqueues of a key overlap
        this.report.operations += round.keys.length * this.clients.length;
        const lists = await Promise.all(this.clients.map(async (c, client) => {
          const answers: BurstAnswer[] = [];
          for (const key of round.keys) {
            try {
              answers.push({ key, client, value: await enqueue(c, { ...round.input, submitKey: key, dedupeKey: key }, { now }) });
            } catch (error) {
              answers.push({ key, client, error });
            }
          }
          return answers;
        }));
        burst = lists.flat();
      } else {
        this.report.operations++;
        cutoffs = {
          finished: model.clock - round.finishedRetentionMs,
          failed: model.clock - round.failedRetentionMs,
          events: model.clock - round.eventRetentionMs,
        };
        await pruneFinished(this.clients[0]!, {
          now, finishedRetentionMs: round.finishedRetentionMs, failedRetentionMs: round.failedRetentionMs, eventRetentionMs: round.eventRetentionMs,
          keptSignalRetentionMs: round.finishedRetentionMs,
        });
        keptCutoff = model.clock - round.finishedRetentionMs;
      }
    } finally {
      busy = false;
      await sampler;
    }

    const rows = await allJobs(this.sql);
    if (keptCutoff !== null) this.record(absorbSignalPrune(model, await keptSignalEventIds(this.sql), rows, keptCutoff));
    const fresh = (await allEvents(this.sql, { afterId: model.flows.lastEventId })).map(historyEvent);
    const flow: FlowRound = { outcomes, timedOut, after: new Map(rows.map((j) => [j.id, j])), fresh, spawned: new Map(), resumed: new Map(), rateSamples };
    await this.readFamilies(flow);
    const spawned = [...flow.spawned.values()].flatMap((s) => s.children?.children.map((c) => c.id) ?? []);
    this.record(checkRound(model, round, outcomes, burst, rows, samples, cutoffs, spawned));
    this.record(checkFlowRound(model, flow));
    for (const j of rows) if (j.type === RATED_TYPE) this.ratedIds.add(j.id);
    absorbFlows(model, flow);
    this.absorb(outcomes, burst, rows, cutoffs);
    return outcomes;
  }

  /** A staged round (scripts/lib/lock-stages.ts): the ops start in order, each once the one before it waits for a lock. */
  private async staged(ops: Op[], now: Date, timedOut: FlowRound['timedOut']): Promise<Outcome[]> {
    const settled = await runStaged(this.sql, ops.map((op) => {
      const sql = this.clients[op.client]!;
      return op.kind === 'hold' ? { sql, hold: op.jobId } : { sql, run: (c: Sql) => execute(c, op, now, timedOut) };
    }));
    return settled.map((s, i) => (s.status === 'fulfilled' ? { op: ops[i]!, value: s.value } : { op: ops[i]!, error: s.reason as unknown }));
  }

  /** The children of each spawn of the round, and of each parent claimed at its resume step (as ctx.children() reads them). */
  private async readFamilies(flow: FlowRound): Promise<void> {
    for (const o of flow.outcomes) {
      if (o.op.kind === 'settle' && o.op.how === 'spawn' && o.value) {
        // the children in the order given, found by their payloads (each child's text is unique)
        const rows = [...flow.after.values()];
        const given = o.op.spawn!.children.map((c) => rows.find((j) => j.type === c.type && j.payload.text === (c.payload as { text: string }).text)?.id ?? '?');
        flow.spawned.set(o.op.lease.jobId, { spawn: o.op.spawn!, settled: o.value as SpawnSettled, children: await jobChildren(this.sql, o.op.lease.jobId), given });
      }
      if (o.op.kind === 'claim' && o.value) {
        for (const j of o.value as Job[]) {
          if (j.step === 'joined' && this.model.flows.families.has(j.id)) flow.resumed.set(j.id, await jobChildren(this.sql, j.id));
        }
      }
    }
  }

  private async sample(now: Date): Promise<UsageSample> {
    return this.model.usage(await allJobs(this.sql, { status: 'running' }), now.getTime());
  }

  /** Claimed events of the rate key in the window ending `now`, from the history as it is at this moment. */
  private async sampleRate(now: Date): Promise<number> {
    const from = now.getTime() - RATE.perMs;
    const older = this.model.flows.events.filter((e) => e.at.getTime() < from).at(-1)?.id ?? 0;
    const events: HistoryEvent[] = (await allEvents(this.sql, { kind: 'claimed', type: RATED_TYPE, afterId: older })).map(historyEvent);
    return events.filter((e) => e.at.getTime() >= from).length;
  }

  /** What the clients learnt in a round: answered ids, submit keys, leases given and given up. */
  private absorb(outcomes: Outcome[], burst: BurstAnswer[], rows: Job[], cutoffs?: PruneCutoffs): void {
    const model = this.model;
    const answer = (r: EnqueueResult, input: { submitKey?: string }, how: string) => {
      if (!model.answered.has(r.job.id)) model.answered.set(r.job.id, how);
      model.seen.add(r.job.id);
      if (!r.duplicate && input.submitKey) model.requests.set(input.submitKey, input as never);
    };
    for (const o of outcomes) {
      const op = o.op;
      if (op.kind === 'enqueue' && o.value) answer(o.value as EnqueueResult, op.input, `an enqueue (round ${this.roundNo})`);
      if (op.kind === 'batch' && o.value) for (const r of o.value as EnqueueResult[]) answer(r, {}, `a batch (round ${this.roundNo})`);
      if (op.kind === 'claim' && o.value) {
        for (const j of o.value as Job[]) {
          for (const held of model.leases.values()) {
            const l = held.get(j.id);
            if (l) l.zombie = true;
          }
          model.leasesOf(op.client).set(j.id, { jobId: j.id, token: j.leaseToken!, lockedUntil: j.lockedUntil!.getTime(), zombie: false });
        }
      }
      if (op.kind === 'settle') model.leasesOf(op.client).delete(op.lease.jobId);
      if (op.kind === 'crash') op.lease.zombie = true;
    }
    for (const a of burst) {
      if (a.value) answer(a.value, { submitKey: a.key }, `burst key ${a.key} (round ${this.roundNo})`);
    }
    for (const a of burst) {
      if (a.value && !a.value.duplicate) model.requests.set(a.key, { type: 'uppercase', payload: { text: 'burst' }, pool: 'burst', delayMs: 3_600_000, submitKey: a.key, dedupeKey: a.key });
    }
    if (cutoffs) {
      const ids = new Set(rows.map((j) => j.id));
      for (const [id, j] of model.jobs) if (!ids.has(id) && Model.prunable(j, cutoffs)) model.pruned.add(id);
    }
    model.sync(rows);
    // a lease that is no longer its job's current one was lost: its holder is now a zombie
    for (const held of model.leases.values()) {
      for (const l of held.values()) if (!model.current(l)) l.zombie = true;
      const zombies = [...held.values()].filter((l) => l.zombie);
      for (const z of zombies.slice(0, Math.max(0, zombies.length - 4))) held.delete(z.jobId);
    }
  }

  /**
   * For each pool: rescue, then claim with one limit until a claim comes back empty (at most
   * ceil(N/L) + 2 claims); then nothing claimable may be left. The claims are kept by client 0.
   */
  private async probeStarvation(): Promise<void> {
    await this.round({ kind: 'ops', advanceMs: 0, ops: [{ kind: 'rescue', client: 0 }] });
    for (const pool of [null, 'a', 'b']) {
      const limit = this.rng.pick([1, 2, 3]);
      const initial = this.model.claimable(pool);
      const bound = Math.ceil(initial.length / limit) + 2;
      const sizes: number[] = [];
      for (let i = 0; i < bound; i++) {
        const [claim] = await this.round({ kind: 'ops', advanceMs: 0, ops: [{ kind: 'claim', client: 0, pool, limit }] });
        const got = claim?.value ? (claim.value as Job[]).length : 0;
        sizes.push(got);
        if (got === 0) break;
      }
      this.record(checkStarvation(pool, limit, initial, sizes, this.model.claimable(pool)));
    }
  }

  /** Every submit key's request again, exactly as first sent: each must answer its job as a duplicate. */
  private async resubmitAll(): Promise<void> {
    const keys = [...this.model.requests.keys()];
    const plain = keys.filter((k) => !k.startsWith('burst-'));
    const bursts = keys.filter((k) => k.startsWith('burst-'));
    const chosen = [...plain, ...bursts.filter(() => this.rng.chance(0.25)).slice(0, 8)];
    for (const key of chosen) {
      await this.round({ kind: 'ops', advanceMs: 0, ops: [{ kind: 'enqueue', client: 1, input: this.model.requests.get(key)!, resubmit: true }] });
    }
  }

  private async replay(): Promise<void> {
    const rows = await allJobs(this.sql);
    const events = (await allEvents(this.sql)).map(historyEvent);
    this.record(checkReplay(rows, events));
  }
}

/** Runs one operation as its client would; a claim then ends each timed-out wait it took, as the runner does before the step. */
async function execute(sql: Sql, op: Op, now: Date, timedOut: Array<{ jobId: string; event: WaitEvent | null }>): Promise<unknown> {
  switch (op.kind) {
    case 'enqueue':
      return enqueue(sql, op.input, { now });
    case 'batch':
      return enqueueBatch(sql, op.inputs, { now });
    case 'claim': {
      const jobs = await claimJobs(sql, { workerId: `c${op.client}`, pool: op.pool, limit: op.limit, now });
      for (const j of jobs) {
        if (!j.cancelRequestedAt && waitStateOf(j).unresolved) timedOut.push({ jobId: j.id, event: await endTimedOutWait(sql, j, { now }) });
      }
      return jobs;
    }
    case 'signal':
      return signalJob(sql, op.jobId, op.name, { key: op.key, payload: { n: op.n }, now });
    case 'event':
      return sendEvent(sql, op.name, { key: op.key, payload: { n: op.n }, now });
    case 'settle': {
      const job = { id: op.lease.jobId, leaseToken: op.lease.token };
      switch (op.how) {
        case 'done':
          return completeJob(sql, job, { text: 'DONE' }, { now });
        case 'continue':
          return continueJob(sql, job, { step: 'next', delayMs: op.delayMs }, { now });
        case 'park':
          return continueJob(sql, job, { step: 'parked', delayMs: null }, { now });
        case 'retry':
          return retryJob(sql, job, 'model: the step failed', op.delayMs, { now });
        case 'cancelled':
          return settleCancelled(sql, job, { now });
        case 'fail':
          return failJob(sql, job, 'model: refused for good', { now });
        case 'wait':
          return settleWait(sql, job, waitFor(op.wait!.name, { key: op.wait!.key, timeoutMs: op.wait!.timeoutMs, step: 'resumed' }), { now });
        case 'spawn':
          return spawnChildren(sql, job, spawn(op.spawn!.children, { next: 'joined', join: op.spawn!.join }), { now });
        case 'rate_limited':
          return settleRateLimitedRow(sql, job, op.delayMs, 'model: the provider answered 429', now);
      }
      break;
    }
    case 'crash':
      return undefined;
    case 'cancel':
      return cancelJob(sql, op.jobId, 'model: cancelled', { now });
    case 'bulk':
      return op.action === 'cancel' ? bulkCancel(sql, op.filter, { batchSize: op.batchSize, reason: 'model: bulk cancel', now })
        : bulkRequeue(sql, op.filter, { batchSize: op.batchSize, now });
    case 'hold':
      throw new Error('a hold runs only in a staged round');
    case 'rescue':
      return rescueExpiredLeases(sql, { now });
  }
}

/** One line per failure: invariant, message, and how to run its history again. */
export function formatFailure(f: Failure): string {
  return `${f.invariant}: ${f.message} [seed ${f.seed}, history ${f.history}, round ${f.round}]`;
}

export function formatTrail(f: Failure): string {
  return `  last rounds of seed ${f.seed} history ${f.history}:\n${f.trail.map((t) => `    ${t}`).join('\n')}`;
}
