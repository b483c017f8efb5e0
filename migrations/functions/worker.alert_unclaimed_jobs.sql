CREATE OR REPLACE FUNCTION worker.alert_unclaimed_jobs(p_threshold_ms bigint DEFAULT 900000, p_limit integer DEFAULT 10000, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone, OUT opened integer, OUT refreshed integer, OUT resolved integer)
 RETURNS record
 LANGUAGE plpgsql
AS $function$
declare
  v_now    timestamptz := coalesce(p_now, now());
  v_cutoff timestamptz;
begin
  if p_threshold_ms is null or p_threshold_ms < 0 then
    raise exception 'thresholdMs must be a non-negative number of milliseconds, got %', p_threshold_ms
      using errcode = 'SB400', column = 'thresholdMs';
  end if;
  if p_limit is null or p_limit < 1 then
    raise exception 'limit must be at least 1, got %', p_limit using errcode = 'SB400', column = 'limit';
  end if;
  v_cutoff := v_now - make_interval(secs => p_threshold_ms / 1000.0);
  -- Unclaimed: due, not held by a pause, and claimable by the claim's own predicate
  -- (worker.claim_eligible) for a runner of the job's pool and every type, whatever a pool's
  -- capacity: a job waiting by design (its concurrency key full, its dedupe key's job active)
  -- does not count; one no runner takes, or no pool has room for, does.

  with waiting as (
    select j.id, j.type, j.pool, j.run_at
      from worker.jobs j
     where j.status = 'queued' and j.run_at < v_cutoff
       and not worker.claim_held_by_pause(j, v_now)
       and worker.claim_eligible(j, j.pool, null, v_now, null, null, null, '{}')
     limit p_limit
  ), groups as (
    select w.type, w.pool, count(*)::int as n, min(w.run_at) as since,
           (array_agg(w.id order by w.run_at, w.id))[1] as oldest
      from waiting w group by w.type, w.pool
  ), up as (
    insert into worker.alerts (kind, key, job_id, message, detail, opened_at, last_seen_at)
    select 'unclaimed_jobs', g.type || coalesce(':' || g.pool, ''), g.oldest,
           g.n || ' ' || g.type || ' job(s)' || coalesce(' in pool ' || g.pool, '') || ' due and unclaimed for more than '
             || trim_scale(round(p_threshold_ms / 60000.0, 1)) || ' min (the oldest, ' || g.oldest || ', due since ' || g.since || ')',
           jsonb_build_object('type', g.type, 'pool', g.pool, 'count', g.n, 'oldest', g.oldest, 'dueSince', g.since,
                              'thresholdMs', p_threshold_ms),
           v_now, v_now
      from groups g
    on conflict (kind, key) where resolved_at is null
    do update set last_seen_at = excluded.last_seen_at, occurrences = worker.alerts.occurrences + 1,
                  job_id = excluded.job_id, detail = excluded.detail
    returning (xmax = 0) as inserted
  )
  select count(*) filter (where inserted), count(*) filter (where not inserted) into opened, refreshed from up;

  with res as (
    update worker.alerts a set resolved_at = v_now
     where a.kind = 'unclaimed_jobs' and a.resolved_at is null
       and not exists (
         select 1 from worker.jobs j
          where j.status = 'queued' and j.run_at < v_cutoff
            and j.type = a.detail->>'type' and j.pool is not distinct from a.detail->>'pool'
            and not worker.claim_held_by_pause(j, v_now)
            and worker.claim_eligible(j, j.pool, null, v_now, null, null, null, '{}'))
    returning a.id)
  select count(*) into resolved from res;
end $function$
;
