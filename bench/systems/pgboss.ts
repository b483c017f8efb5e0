import { PgBoss } from 'pg-boss';
import { countRow, loopsFor, PRODUCER_CONNECTIONS, type BenchSettings, type BenchSystem, type NoopPayload, type RetentionSettings, type SystemInstance } from './types.ts';

const QUEUE = 'noop';
const BULK_CHUNK = 5_000;

/**
 * pg-boss with batching on: `localConcurrency` workers each fetching `batchSize` jobs and
 * completing the batch in one statement, fetching again at once while batches come back full
 * (burstWhenBatchFull), and woken by LISTEN/NOTIFY (useListenNotify + a notify queue). Cron and
 * maintenance are off in burn-down and steady, as they are for every system there. Sustained mode
 * turns on its production maintenance (supervise: the retention sweep of completed jobs past the
 * queue's deleteAfterSeconds), compressed in time: it runs every `intervalSeconds` (defaults: the
 * supervisor every 60 s, deletion at most every 24 h) and deletes after `retentionSeconds` (7 days).
 */
export function pgBossSystem(version: string): BenchSystem {
  const options = (url: string, max: number, retention?: RetentionSettings) => ({
    connectionString: url,
    max,
    schedule: false,
    supervise: retention !== undefined,
    ...(retention && { superviseIntervalSeconds: retention.intervalSeconds, maintenanceIntervalSeconds: retention.intervalSeconds }),
    useListenNotify: true,
    application_name: 'bench-pgboss',
  });
  const work = (s: BenchSettings) => {
    const { loops, perLoop } = loopsFor(s);
    return {
      localConcurrency: loops,
      batchSize: perLoop,
      burstWhenBatchFull: true,
      pollingIntervalSeconds: Math.max(0.5, s.idlePollMs / 1000),
    };
  };
  return {
    name: 'pg-boss',
    version,
    describe: (s) => {
      const w = work(s);
      return `localConcurrency ${w.localConcurrency} × batchSize ${w.batchSize}, burstWhenBatchFull, max ${s.connections}, ` +
        `useListenNotify + queue notify, pollingIntervalSeconds ${w.pollingIntervalSeconds}`;
    },
    async install(url, settings, retention) {
      const boss = new PgBoss(options(url, settings.connections, retention));
      boss.on('error', (e) => console.error('pg-boss error:', e));
      await boss.start();
      await boss.createQueue(QUEUE, { notify: true, ...(retention && { deleteAfterSeconds: retention.retentionSeconds }) });
      let producer: PgBoss | undefined;
      // The producer only sends: no supervisor of its own, whatever the workers' instance runs.
      const openProducerBoss = async () => {
        const p = (producer = new PgBoss({ ...options(url, PRODUCER_CONNECTIONS), migrate: false, application_name: 'bench-producer' }));
        p.on('error', (e) => console.error('pg-boss producer error:', e));
        await p.start();
        return p;
      };
      const instance: SystemInstance = {
        unsettled: (probe) => countRow(probe, `select count(*)::int as n from pgboss.job where state <> 'completed'`),
        rowsLeft: async (probe) => ({ jobs: await countRow(probe, `select count(*)::int as n from pgboss.job`) }),
        async enqueueBulk(n) {
          for (let i = 0; i < n; i += BULK_CHUNK) {
            const size = Math.min(BULK_CHUNK, n - i);
            await boss.insert(QUEUE, Array.from({ length: size }, () => ({ data: {} })));
          }
        },
        async openProducer() {
          const p = await openProducerBoss();
          return async (payload) => {
            await p.send(QUEUE, payload as object);
          };
        },
        async openBulkProducer() {
          const p = await openProducerBoss();
          return async (payloads) => {
            await p.insert(QUEUE, payloads.map((data) => ({ data })));
          };
        },
        async startWorkers(onJob) {
          await boss.work(QUEUE, work(settings), async (jobs) => {
            for (const job of jobs) onJob(job.data as NoopPayload);
          });
        },
        async close() {
          await boss.stop({ graceful: true, timeout: 10_000 });
          await producer?.stop({ graceful: true, timeout: 10_000 });
        },
      };
      return instance;
    },
  };
}
