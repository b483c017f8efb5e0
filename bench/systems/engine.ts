import { z } from 'zod';
import { connect, type Sql } from '../../queue/db.ts';
import { unsettledJobCount } from '../../queue/driver/benchmark.ts';
import { enqueue, enqueueBatch } from '../../queue/enqueue.ts';
import { migrate } from '../../queue/migrate.ts';
import { defineJobType, done, JobRegistry } from '../../queue/registry.ts';
import { runSteps } from '../../queue/runner.ts';
import { loopsFor, PRODUCER_CONNECTIONS, type BenchSystem, type NoopPayload, type SystemInstance } from './types.ts';

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
    async install(url, settings) {
      const admin = connect(url, { max: 1 });
      await migrate(admin);
      let onJob: (payload: NoopPayload) => void = () => {};
      const registry = noopRegistry((payload) => onJob(payload));
      await registry.sync(admin);
      let producer: Sql | undefined;
      let workers: Sql | undefined;
      const stop = new AbortController();
      const loops: Promise<unknown>[] = [];
      const instance: SystemInstance = {
        // the engine's own read, on its admin connection (idle while the workers run)
        unsettled: () => unsettledJobCount(admin),
        async enqueueBulk(n) {
          for (let i = 0; i < n; i += BULK_CHUNK) {
            const size = Math.min(BULK_CHUNK, n - i);
            await enqueueBatch(admin, Array.from({ length: size }, () => ({ type: NOOP_TYPE, payload: {} })));
          }
        },
        async openProducer() {
          const p = (producer = connect(url, { max: PRODUCER_CONNECTIONS, applicationName: 'bench-producer' }));
          await p`select 1`;
          return async (payload) => {
            await enqueue(p, { type: NOOP_TYPE, payload: payload as Record<string, number> });
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
          await Promise.all([workers?.end({ timeout: 5 }), producer?.end({ timeout: 5 }), admin.end({ timeout: 5 })]);
        },
      };
      return instance;
    },
  };
}
