import { z } from 'zod';
import { connect, type Sql } from '../../queue/db.ts';
import { jobAndEventRows, unsettledJobCount } from '../../queue/driver/benchmark.ts';
import { enqueue, enqueueBatch } from '../../queue/enqueue.ts';
import { pruneFinished } from '../../queue/maintenance/prune.ts';
import { rollupJobEvents } from '../../queue/maintenance/upkeep.ts';
import { migrate } from '../../queue/migrate.ts';
import { defineJobType, done, JobRegistry } from '../../queue/registry.ts';
import { runSteps } from '../../queue/runner.ts';
import { loopsFor, PRODUCER_CONNECTIONS, type BenchSystem, type NoopPayload, type RetentionSettings, type SystemInstance } from './types.ts';
import { repeatEvery } from './retention.ts';

export const NOOP_TYPE = 'bench_noop';
const BULK_CHUNK = 5_000;

/** The bench's one job type: does nothing but report its payload as it starts. */
export function noopRegistry(onJob: (payload: NoopPayload) => void): JobRegistry {
  return new JobRegistry([
    defineJobType({
      type: NOOP_TYPE,
      payload: z.object({ t: z.number().optional() }),
      async run({ payload }) {
        onJob(payload);
        return done();
      },
    }),
  ]);
}

/**
 * This engine's Node runner: `runSteps`, the loop the Worker runs per invocation. `loops` runners
 * (like that many concurrent Worker invocations) share one pool of `connections`, and split the
 * concurrency between them.
 */
export function engineSystem(version: string): BenchSystem {
  return {
    name: 'starbase',
    version,
    describe: (s) =>
      `runSteps × ${loopsFor(s).loops} loops, concurrency ${loopsFor(s).perLoop} each (claim batch = free slots), ` +
      `postgres.js pool ${s.connections}, idleWaitMs ${s.idlePollMs}`,
    async install(url, settings, retention) {
      const admin = connect(url, { max: 1 });
      await migrate(admin);
      let onJob: (payload: NoopPayload) => void = () => {};
      const registry = noopRegistry((payload) => onJob(payload));
      await registry.sync(admin);
      let producer: Sql | undefined;
      const openProducerSql = async () => {
        const p = (producer = connect(url, { max: PRODUCER_CONNECTIONS, applicationName: 'bench-producer' }));
        await p`select 1`;
        return p;
      };
      let workers: Sql | undefined;
      const stop = new AbortController();
      const loops: Promise<unknown>[] = [];
      const maintenance = retention ? startPruning(url, retention) : null;
      const instance: SystemInstance = {
        // the engine's own read, on its admin connection (idle while the workers run)
        unsettled: () => unsettledJobCount(admin),
        rowsLeft: () => jobAndEventRows(admin),
        async enqueueBulk(n) {
          for (let i = 0; i < n; i += BULK_CHUNK) {
            const size = Math.min(BULK_CHUNK, n - i);
            await enqueueBatch(admin, Array.from({ length: size }, () => ({ type: NOOP_TYPE, payload: {} })));
          }
        },
        async openProducer() {
          const p = await openProducerSql();
          return async (payload) => {
            await enqueue(p, { type: NOOP_TYPE, payload: payload as Record<string, number> });
          };
        },
        async openBulkProducer() {
          const p = await openProducerSql();
          return async (payloads) => {
            await enqueueBatch(p, payloads.map((payload) => ({ type: NOOP_TYPE, payload: payload as Record<string, number> })));
          };
        },
        async startWorkers(handler) {
          onJob = handler;
          workers = connect(url, { max: settings.connections, applicationName: 'bench-starbase' });
          const { loops: n, perLoop } = loopsFor(settings);
          for (let i = 0; i < n; i++) {
            loops.push(
              runSteps(
                { sql: workers, registry, workerId: `bench-${i}`, concurrency: perLoop },
                { idleWaitMs: settings.idlePollMs, signal: stop.signal, graceMs: 5_000 },
              ),
            );
          }
        },
        async close() {
          stop.abort();
          await Promise.all(loops);
          await maintenance?.stop();
          await Promise.all([workers?.end({ timeout: 5 }), producer?.end({ timeout: 5 }), admin.end({ timeout: 5 })]);
        },
      };
      return instance;
    },
  };
}

/**
 * The retention part of the engine's maintenance tick, on its own connection: pruneFinished
 * (finished jobs, then events, past retention, at most 10,000 of each per pass, as the tick does)
 * and the events roll-up, every `intervalSeconds`. In production the tick runs once a minute with
 * days of retention; the bench compresses both so that deletion runs many times within the run.
 */
function startPruning(url: string, retention: RetentionSettings): { stop(): Promise<void> } {
  const sql = connect(url, { max: 1, applicationName: 'bench-starbase-maintenance' });
  const retentionMs = retention.retentionSeconds * 1000;
  const loop = repeatEvery(retention.intervalSeconds * 1000, async () => {
    await pruneFinished(sql, { finishedRetentionMs: retentionMs, failedRetentionMs: retentionMs, eventRetentionMs: retentionMs });
    await rollupJobEvents(sql);
  });
  return {
    async stop() {
      await loop.stop();
      await sql.end({ timeout: 5 });
    },
  };
}
