CREATE OR REPLACE FUNCTION worker.record_depth_snapshot(p_at timestamp with time zone, p_retention_ms bigint DEFAULT 604800000)
 RETURNS void
 LANGUAGE sql
AS $function$
  insert into worker.depth_snapshots (at, queued, due, running)
  select date_trunc('minute', p_at),
         count(*) filter (where status = 'queued'),
         count(*) filter (where status = 'queued' and run_at <= p_at),
         count(*) filter (where status = 'running')
    from worker.jobs where status in ('queued', 'running')
  on conflict (at) do nothing;
  delete from worker.depth_snapshots where at < p_at - make_interval(secs => p_retention_ms / 1000.0);
$function$
;
