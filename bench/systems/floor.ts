import postgres from 'postgres';
import { repeatEvery } from './retention.ts';
import { countRow, loopsFor, PRODUCER_CONNECTIONS, type BenchSystem, type NoopPayload, type SystemInstance } from './types.ts';

/**
 * The physical reference: the least a SKIP LOCKED queue that keeps its rows can do. Each loop claims
 * a batch (one UPDATE … WHERE id = ANY(ARRAY(SELECT … FOR UPDATE SKIP LOCKED)), which keeps the
 * update on the primary key) and completes it (one UPDATE … WHERE id = ANY). No leases, events,
 * retries or results. Its retention (sustained mode) is a periodic sweep that deletes every done row.
 */
export function floorSystem(): BenchSystem {
  return {
    name: 'raw-floor',
    version: 'SQL',
    describe: (s) =>
      `${loopsFor(s).loops} loops × batch ${loopsFor(s).perLoop}: claim UPDATE…SKIP LOCKED, complete UPDATE…ANY; idle poll ${s.idlePollMs} ms`,
    async install(url, settings, retention) {
      const sql = postgres(url, { max: settings.connections, onnotice: () => {}, connection: { application_name: 'bench-floor' } });
      await sql`create table floor_jobs (
                  id bigint generated always as identity primary key,
                  payload jsonb not null default '{}'::jsonb,
                  status text not null default 'queued',
                  created_at timestamptz not null default now())`;
      await sql`create index floor_jobs_queued_idx on floor_jobs (id) where status = 'queued'`;
      let producer: postgres.Sql | undefined;
      const openProducerSql = async () => {
        const p = (producer = postgres(url, { max: PRODUCER_CONNECTIONS, onnotice: () => {}, connection: { application_name: 'bench-producer' } }));
        await p`select 1`;
        return p;
      };
      let stopped = false;
      const loops: Promise<void>[] = [];
      const { loops: loopCount, perLoop: batch } = loopsFor(settings);
      async function loop(onJob: (p: NoopPayload) => void) {
        while (!stopped) {
          const rows = await sql`
            update floor_jobs set status = 'running'
             where id = any(array(select id from floor_jobs where status = 'queued' order by id limit ${batch} for update skip locked))
            returning id, payload`;
          if (rows.length === 0) {
            await new Promise((r) => setTimeout(r, settings.idlePollMs));
            continue;
          }
          for (const row of rows) onJob(row.payload as NoopPayload);
          await sql`update floor_jobs set status = 'done' where id = any(${rows.map((r) => r.id as string)}::bigint[])`;
        }
      }
      // Done rows carry no finish time, so the sweep keeps none: deleting sooner only favours the floor.
      const sweep = retention
        ? repeatEvery(retention.intervalSeconds * 1000, async () => {
            await sql`delete from floor_jobs where status = 'done'`;
          })
        : null;
      const instance: SystemInstance = {
        unsettled: (probe) => countRow(probe, `select count(*)::int as n from floor_jobs where status <> 'done'`),
        rowsLeft: async (probe) => ({ jobs: await countRow(probe, `select count(*)::int as n from floor_jobs`) }),
        async enqueueBulk(n) {
          await sql`insert into floor_jobs (payload) select '{}'::jsonb from generate_series(1, ${n}::int)`;
        },
        async openProducer() {
          const p = await openProducerSql();
          return async (payload) => {
            await p`insert into floor_jobs (payload) values (${p.json(payload as postgres.JSONValue)})`;
          };
        },
        async openBulkProducer() {
          const p = await openProducerSql();
          return async (payloads) => {
            await p`insert into floor_jobs (payload) select value from jsonb_array_elements(${p.json(payloads as unknown as postgres.JSONValue)})`;
          };
        },
        async startWorkers(onJob) {
          for (let i = 0; i < loopCount; i++) loops.push(loop(onJob));
        },
        async close() {
          stopped = true;
          await Promise.all(loops);
          await sweep?.stop();
          await Promise.all([sql.end({ timeout: 5 }), producer?.end({ timeout: 5 })]);
        },
      };
      return instance;
    },
  };
}
