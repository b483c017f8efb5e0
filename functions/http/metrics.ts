import { Hono } from 'hono';
import { JOB_STATUSES, readLeaderLease } from '../../queue/index.ts';
import { renderMetrics, type MetricFamily } from '../lib/prometheus.ts';
import { requireScope } from './auth.ts';
import { invocationOf, type AppEnv } from './context.ts';

export const metrics = new Hono<AppEnv>();

metrics.get('/metrics', requireScope('metrics'), async (c) => {
  const inv = await invocationOf(c);
  const { sql } = inv;
  const depth = await sql`select status, type, count(*)::int as n from worker.jobs group by 1, 2`;
  const [oldest] = await sql`select coalesce(extract(epoch from now() - min(run_at)), 0)::float8 as age from worker.jobs where status = 'queued' and run_at <= now()`;
  const lease = await readLeaderLease(sql);
  const families: MetricFamily[] = [
    {
      name: 'starbase_jobs',
      help: 'Jobs by status and type.',
      type: 'gauge',
      samples: depth.map((r) => ({ labels: { status: r.status as string, type: r.type as string }, value: r.n as number })),
    },
    {
      name: 'starbase_queue_depth',
      help: 'Jobs by status, all types.',
      type: 'gauge',
      samples: JOB_STATUSES.map((status) => ({
        labels: { status },
        value: depth.filter((r) => r.status === status).reduce((n, r) => n + (r.n as number), 0),
      })),
    },
    { name: 'starbase_oldest_due_job_age_seconds', help: 'Age of the oldest due queued job.', type: 'gauge', samples: [{ value: oldest!.age as number }] },
    { name: 'starbase_leader_generation', help: 'Generation of the leader lease.', type: 'gauge', samples: [{ labels: { holder: lease.holder ?? '' }, value: lease.generation }] },
  ];
  return c.body(renderMetrics(families), 200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' });
});
