CREATE OR REPLACE FUNCTION worker.claim_plain(p_worker text, p_pool text, p_limit integer, p_now timestamp with time zone, p_types text[])
 RETURNS SETOF worker.jobs
 LANGUAGE plpgsql
AS $function$
begin
  -- The claim's plain path, which worker.claim_jobs takes when no pause, rate key, fairness key,
  -- pool capacity or queued concurrency key is in play: then what worker.claim_eligible asks of
  -- a job is its pool, the runner's types and its dedupe key, and one statement takes the due
  -- jobs in claim order, past those other claims hold, and leases them. It runs under
  -- claim_jobs's settings (generic plans; index walks only, `run_at + 0` keeping
  -- jobs_claimable_idx the one candidate, as claim_jobs explains).
  return query select * from worker.lease_jobs(array(
    select j.id from worker.jobs j
     where j.status = 'queued' and j.run_at + interval '0' <= p_now
       and (j.pool is null or j.pool is not distinct from p_pool)
       and (p_types is null or j.type = any (p_types))
       and (j.dedupe_key is null or j.started_at is not null or not exists (
             select 1 from worker.jobs a
              where a.dedupe_key = j.dedupe_key and a.status in ('queued', 'running') and a.started_at is not null))
     order by j.priority, j.run_at
     limit p_limit
       for update of j skip locked), p_worker, p_pool, p_now);
end $function$
;
