CREATE OR REPLACE FUNCTION worker.bulk_cancel(p_filter jsonb, p_dry_run boolean DEFAULT true, p_reason text DEFAULT 'cancelled in bulk by operator'::text, p_limit integer DEFAULT 500, p_after uuid DEFAULT NULL::uuid, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone, OUT matched bigint, OUT cancelled integer, OUT cancel_requested integer, OUT skipped integer, OUT next_after uuid)
 RETURNS record
 LANGUAGE sql
AS $function$
  -- Cancel by filter (worker.job_filter_of): each queued or running job it takes goes through
  -- worker.cancel_job: one that never started is cancelled at once, a started one gets a cancel
  -- request (its hook runs at its next step). Dry run by default; batches as worker.bulk_requeue.
  select b.matched, b.applied, b.requested, b.skipped, b.next_after
    from worker.bulk_apply('cancel', p_filter, p_dry_run, p_limit, p_after, p_reason, p_now) b
$function$
;
