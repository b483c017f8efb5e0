CREATE OR REPLACE FUNCTION worker.job_filter_matches(j worker.jobs, f worker.job_filter)
 RETURNS boolean
 LANGUAGE sql
 STABLE
AS $function$
  -- Whether a job is one a bulk operation's filter takes: checked when the batch is chosen and
  -- again once its row is locked (the job may have moved on in between). A cancel does not take a
  -- job whose cancel is already requested: there is nothing left to do to it.
  select j.status = any (f.statuses)
     and (f.type is null or j.type = f.type)
     and (f.created_after is null or j.created_at >= f.created_after)
     and (f.created_before is null or j.created_at < f.created_before)
     and (f.finished_after is null or j.finished_at >= f.finished_after)
     and (f.finished_before is null or j.finished_at < f.finished_before)
     and (f.op <> 'cancel' or j.cancel_requested_at is null)
     and (f.fingerprint is null or worker.error_fingerprint(j.last_error) = f.fingerprint)
$function$
;
