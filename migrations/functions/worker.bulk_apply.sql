CREATE OR REPLACE FUNCTION worker.bulk_apply(p_op text, p_filter jsonb, p_dry_run boolean, p_limit integer, p_after uuid, p_reason text, p_now timestamp with time zone, OUT matched bigint, OUT applied integer, OUT requested integer, OUT skipped integer, OUT next_after uuid)
 RETURNS record
 LANGUAGE plpgsql
AS $function$
declare
  v_now timestamptz := coalesce(p_now, now());
  v_f   worker.job_filter := worker.job_filter_of(p_filter, p_op);
  v_ids uuid[];
  v_id  uuid;
  v_row worker.jobs;
  v_job worker.jobs;
begin
  -- The body of worker.bulk_requeue and worker.bulk_cancel. A dry run counts what the filter
  -- takes now and changes nothing. Otherwise one batch: the next p_limit jobs by id after p_after,
  -- all locked first in the engine's one lock order (worker.lock_job_trees: for a cancel their
  -- unfinished descendants too, deepest first, then the jobs by id; so a bulk operation never
  -- holds a parent while it waits for a child a settle holds), each checked against the filter
  -- again (a concurrent operation may have moved it on: skipped), and changed by the single
  -- operation itself (worker.requeue_job / worker.cancel_job: the same transition, checks and
  -- event). next_after is the cursor for the next batch, null when this one was the last.
  matched := 0; applied := 0; requested := 0; skipped := 0;
  if p_dry_run then
    select count(*) into matched from worker.job_filter_next_ids(v_f, null, null);
    return;
  end if;
  if p_limit is null or p_limit not between 1 and 10000 then
    raise exception 'limit must be from 1 to 10000 jobs a batch, got %', coalesce(p_limit::text, 'null') using errcode = 'SB400', column = 'limit';
  end if;
  -- one more than the batch: whether another batch follows, so a set of an exact multiple of
  -- p_limit does not take an empty last call
  v_ids := array(select worker.job_filter_next_ids(v_f, p_after, p_limit + 1));
  next_after := case when cardinality(v_ids) > p_limit then v_ids[p_limit] end;
  if p_op = 'cancel' then
    perform worker.lock_job_trees(v_ids[1:p_limit]);
  else
    perform 1 from worker.jobs j where j.id = any (v_ids[1:p_limit]) order by j.id for update;
  end if;
  foreach v_id in array v_ids[1:p_limit] loop
    matched := matched + 1;
    select * into v_row from worker.jobs j where j.id = v_id for update;
    if not found or not worker.job_filter_matches(v_row, v_f) then
      skipped := skipped + 1;
      continue;
    end if;
    if p_op = 'requeue' then
      begin
        perform worker.requeue_job(v_id, v_now);
        applied := applied + 1;
      exception when sqlstate 'SB409' then
        -- another job holds its dedupe key: it stays as it is
        skipped := skipped + 1;
      end;
    else
      v_job := worker.cancel_job(v_id, p_reason, v_now);
      if v_job.status = 'cancelled' then applied := applied + 1; else requested := requested + 1; end if;
    end if;
  end loop;
end $function$
;
