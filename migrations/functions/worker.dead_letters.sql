CREATE OR REPLACE FUNCTION worker.dead_letters(p_type text DEFAULT NULL::text, p_limit integer DEFAULT 100)
 RETURNS TABLE(type text, fingerprint text, error text, jobs bigint, failed bigint, oom_killed bigint, first_seen timestamp with time zone, last_seen timestamp with time zone, sample_id uuid, sample_error text)
 LANGUAGE plpgsql
 STABLE
AS $function$
begin
  -- The dead letters (failed and oom_killed jobs: those the engine gave up on) grouped by type
  -- and how they failed (worker.error_fingerprint), the group seen last first: each with its
  -- count, when its first and last job ended, and its latest job as the sample. Read through the
  -- dead letters' own partial index, so done jobs, however many, cost nothing here.
  -- "retry this group" is worker.bulk_requeue('{"type": …, "fingerprint": …}', false).
  return query
  select d.type, left(md5(d.error), 16), d.error, count(*), count(*) filter (where d.status = 'failed'),
         count(*) filter (where d.status = 'oom_killed'), min(d.finished_at), max(d.finished_at),
         (array_agg(d.id order by d.finished_at desc, d.id desc))[1],
         (array_agg(d.last_error order by d.finished_at desc, d.id desc))[1]
    from (select j.type, j.status, j.id, j.finished_at, j.last_error, worker.normalize_error(j.last_error) as error
            from worker.jobs j
           where j.status in ('failed', 'oom_killed') and (p_type is null or j.type = p_type)) d
   group by d.type, d.error
   order by max(d.finished_at) desc, d.type, d.error
   limit p_limit;
end $function$
;
