CREATE OR REPLACE FUNCTION worker.prune_signals(p_kept_cut timestamp with time zone, p_limit integer, OUT waits integer, OUT events integer, OUT expired integer, OUT channels integer)
 RETURNS record
 LANGUAGE plpgsql
AS $function$
declare
  v_jobs     uuid[];
  v_names    text[];              -- channels, as (v_names[i], v_keys[i])
  v_keys     text[];
begin
  -- One bounded pass over the signals' rows (0190), at most p_limit rows of each kind: the waits
  -- of jobs that ended or are gone, the kept events no wait can take any more (their job ended
  -- or is gone), the kept events older than p_kept_cut (dropped unconsumed: `expired`), and the
  -- channels no wait and no event is left on. (A consumed event is deleted by the wait that
  -- takes it.) Every lock here is taken with SKIP LOCKED, so the prune never waits for a
  -- signal or a wait settle and cannot close a cycle with their order (channel, job, wait):
  -- what one of them holds is left for the next pass. The rows of a job are deleted under the
  -- job's row lock, those of a channel under the channel's, the locks signal() and wait_for()
  -- take before they touch them, so the prune never deletes a row one of them is about to use.
  if p_limit is null or p_limit < 1 then
    raise exception 'limit must be at least 1, got %', p_limit using errcode = 'SB400', column = 'limit';
  end if;

  -- The jobs whose waits or job-addressed events go: ended (locked, so no requeue starts them
  -- again meanwhile) or gone (an id never comes back).
  select coalesce(array_agg(x.job_id), '{}') into v_jobs from (
    select w.job_id from worker.job_waits w
     where not exists (select 1 from worker.jobs j where j.id = w.job_id and j.status in ('queued', 'running'))
    union
    select e.job_id from worker.signal_events e
     where e.job_id is not null
       and not exists (select 1 from worker.jobs j where j.id = e.job_id and j.status in ('queued', 'running'))
    limit p_limit) x;
  if cardinality(v_jobs) > 0 then
    v_jobs := array(select j.id from worker.jobs j where j.id = any (v_jobs) and j.status not in ('queued', 'running')
                     for update of j skip locked)
              || array(select u.id from unnest(v_jobs) u(id) where not exists (select 1 from worker.jobs j where j.id = u.id));
    delete from worker.job_waits w where w.job_id = any (v_jobs);
    get diagnostics waits = row_count;
    delete from worker.signal_events e where e.job_id = any (v_jobs);
    get diagnostics events = row_count;
  else
    waits := 0;
    events := 0;
  end if;

  -- Kept events past retention: a job's under its row lock (signal() for a job locks it before
  -- it keeps an event, wait_for() before it takes one), a channel's under the channel's lock.
  with old as (
    select e.id, e.job_id from worker.signal_events e
     where e.created_at < p_kept_cut and e.job_id is not null order by e.created_at limit p_limit
  ), locked as (
    select j.id from worker.jobs j where j.id in (select o.job_id from old o) for update of j skip locked
  ), del as (
    delete from worker.signal_events e using old o, locked l where e.id = o.id and o.job_id = l.id returning 1
  )
  select count(*)::int into expired from del;

  select coalesce(array_agg(x.name), '{}'), coalesce(array_agg(x.key), '{}') into v_names, v_keys from (
    select c.name, c.key from worker.signal_channels c
     where (c.name, c.key) in (select e.name, e.key from worker.signal_events e
                                where e.created_at < p_kept_cut and e.job_id is null order by e.created_at limit p_limit)
       for update of c skip locked) x;
  if cardinality(v_names) > 0 then
    with del as (
      delete from worker.signal_events e
       where e.job_id is null and e.created_at < p_kept_cut
         and (e.name, e.key) in (select * from unnest(v_names, v_keys))
      returning 1)
    select expired + count(*)::int into expired from del;
  end if;

  -- Channels with nothing on them. Locked first; then, in a statement of its own (a snapshot
  -- that sees every wait and event committed before the lock was taken, and no later one can be
  -- added: both need the lock), deleted if still empty. A signal whose insert found the row just
  -- before this delete finds it gone at its lock and makes it again (worker.lock_signal_channel).
  select coalesce(array_agg(x.name), '{}'), coalesce(array_agg(x.key), '{}') into v_names, v_keys from (
    select c.name, c.key from worker.signal_channels c
     where not exists (select 1 from worker.job_waits w where w.name = c.name and w.key = c.key)
       and not exists (select 1 from worker.signal_events e where e.job_id is null and e.name = c.name and e.key = c.key)
     limit p_limit
       for update of c skip locked) x;
  delete from worker.signal_channels c
   where (c.name, c.key) in (select * from unnest(v_names, v_keys))
     and not exists (select 1 from worker.job_waits w where w.name = c.name and w.key = c.key)
     and not exists (select 1 from worker.signal_events e where e.job_id is null and e.name = c.name and e.key = c.key);
  get diagnostics channels = row_count;
end $function$
;
