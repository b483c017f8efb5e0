CREATE OR REPLACE FUNCTION worker.bulk_requeue(p_filter jsonb, p_dry_run boolean DEFAULT true, p_limit integer DEFAULT 500, p_after uuid DEFAULT NULL::uuid, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone, OUT matched bigint, OUT requeued integer, OUT skipped integer, OUT next_after uuid)
 RETURNS record
 LANGUAGE sql
AS $function$
  -- Retry by filter (worker.job_filter_of): each failed, cancelled or oom_killed job it takes is
  -- requeued by worker.requeue_job. A dry run (the default) only counts; a real call does one
  -- batch of p_limit and answers next_after, the p_after of the next call (null: done).
  select b.matched, b.applied, b.skipped, b.next_after
    from worker.bulk_apply('requeue', p_filter, p_dry_run, p_limit, p_after, null, p_now) b
$function$
;
