import postgres from 'postgres';
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
const sql = postgres(url.replace(/\/[^/]*$/, '/bench'), { max: 1, onnotice: () => {} });
await migrate(sql);
await sql`insert into worker.job_types (type) values ('bench_noop')`;
await sql`select count(*) from worker.enqueue_jobs((select jsonb_agg(jsonb_build_object('type', 'bench_noop')) from generate_series(1, ${jobs}::int)))`;
await sql`
  create procedure public.drain() language plpgsql as $$
  declare done jsonb := '[]'; r json;
  begin
    loop
      r := worker.settle_and_claim(done, 'bench', null, 128);
      -- The next completions come from the table (the jobs this loop holds), not from parsing r:
      -- parsing json in SQL would cost more than writing it and would change with its format.
      select coalesce(jsonb_agg(jsonb_build_object('id', j.id, 'token', j.lease_token, 'result', null)), '[]') into done
        from worker.jobs j where j.status = 'running';
      commit;
      exit when jsonb_array_length(done) = 0;
    end loop;
  end $$`;
await sql`vacuum analyze`;
await sql`checkpoint`;
await sql.end();
