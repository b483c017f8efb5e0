import { Logger, makeWorkerUtils, run, runMigrations, type Runner, type WorkerUtils } from 'graphile-worker';
import { countRow, PRODUCER_CONNECTIONS, type BenchSettings, type BenchSystem, type NoopPayload, type SystemInstance } from './types.ts';

const TASK = 'noop';
const BULK_CHUNK = 5_000;
/** graphile-worker's own performance page runs its throughput test with a local queue of 500. */
const LOCAL_QUEUE_SIZE = 500;
const quiet = new Logger(() => () => {});

/**
 * graphile-worker as its performance docs configure it for throughput: a local queue (batch
 * fetch) and batched completions (completeJobBatchDelay/failJobBatchDelay 0). It wakes on
 * LISTEN/NOTIFY when jobs are added, so its poll interval stays at the default. It deletes a job
 * when it completes, so it has no retention to run (sustained mode changes nothing).
 */
export function graphileSystem(version: string): BenchSystem {
  const preset = (url: string, s: BenchSettings) => ({
    worker: {
      connectionString: url,
      concurrentJobs: s.concurrency,
      maxPoolSize: s.connections,
      localQueue: { size: LOCAL_QUEUE_SIZE },
      completeJobBatchDelay: 0,
      failJobBatchDelay: 0,
      logger: quiet,
    },
  });
  return {
    name: 'graphile-worker',
    version,
    describe: (s) =>
      `concurrentJobs ${s.concurrency}, maxPoolSize ${s.connections}, localQueue.size ${LOCAL_QUEUE_SIZE}, ` +
      `completeJobBatchDelay 0, failJobBatchDelay 0, LISTEN/NOTIFY`,
    async install(url, settings) {
      await runMigrations({ preset: preset(url, settings) });
      let utils: WorkerUtils | undefined;
      const producer = async () => (utils ??= await makeWorkerUtils({ connectionString: url, maxPoolSize: PRODUCER_CONNECTIONS, logger: quiet }));
      let runner: Runner | undefined;
      const instance: SystemInstance = {
        unsettled: (probe) => countRow(probe, `select count(*)::int as n from graphile_worker._private_jobs`),
        rowsLeft: async (probe) => ({ jobs: await instance.unsettled(probe) }),
        async enqueueBulk(n) {
          const u = await producer();
          for (let i = 0; i < n; i += BULK_CHUNK) {
            const size = Math.min(BULK_CHUNK, n - i);
            await u.addJobs(Array.from({ length: size }, () => ({ identifier: TASK, payload: {} })));
          }
        },
        async openProducer() {
          const u = await producer();
          return async (payload) => {
            await u.addJob(TASK, payload);
          };
        },
        async openBulkProducer() {
          const u = await producer();
          return async (payloads) => {
            await u.addJobs(payloads.map((payload) => ({ identifier: TASK, payload })));
          };
        },
        async startWorkers(onJob) {
          runner = await run({
            preset: preset(url, settings),
            noHandleSignals: true,
            taskList: {
              [TASK]: async (payload) => {
                onJob(payload as NoopPayload);
              },
            },
          });
        },
        async close() {
          await runner?.stop();
          await utils?.release();
        },
      };
      return instance;
    },
  };
}
