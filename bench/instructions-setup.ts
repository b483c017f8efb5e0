import postgres from 'postgres';
import { connect } from '../queue/db.ts';
import { createDrainProcedure } from '../queue/driver/benchmark.ts';
import { upsertJobTypes } from '../queue/driver/job-types.ts';
import { enqueueBatch } from '../queue/enqueue.ts';
import { migrate } from '../queue/migrate.ts';

// Prepares the database bench/instructions.sh measures: migrations, JOBS queued no-op jobs, and
// the runner's loop as a procedure (each round trip settles the previous batch and claims the
// next 128).
const [url, jobsArg] = process.argv.slice(2);
const jobs = Number(jobsArg);
if (!url || !Number.isInteger(jobs) || jobs < 1) throw new Error('usage: instructions-setup.ts DATABASE_URL JOBS');
const admin = postgres(url, { max: 1, onnotice: () => {} });
await admin`create database bench`;
await admin.end();
const sql = connect(url.replace(/\/[^/]*$/, '/bench'), { max: 1 });
await migrate(sql);
// the table's defaults, as a type row written by hand would have them
await upsertJobTypes(sql, [{
  type: 'bench_noop', lease_ms: 120_000, max_attempts: 3, weight: 'light', payload_schema: null, access: 'internal',
  enqueue_via: null, concurrency_key: null, concurrency_limit: null,
}]);
await enqueueBatch(sql, Array.from({ length: jobs }, () => ({ type: 'bench_noop' })));
await createDrainProcedure(sql);
await sql`vacuum analyze`;
await sql`checkpoint`;
await sql.end();
