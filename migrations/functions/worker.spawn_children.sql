CREATE OR REPLACE FUNCTION worker.spawn_children(p_id uuid, p_token uuid, p_step text, p_checkpoint jsonb, p_join text, p_count integer, p_children jsonb, p_now timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  v_now     timestamptz := coalesce(p_now, now());
  v_parent  worker.jobs;
  v_wait_no integer;
  v_total   integer;
  v_ended   integer;
  v_created integer;
  v_need    integer;
  v_joined  boolean;
  v_ids     uuid[];
  v_new     uuid[];
  v_child   uuid;
  m text; c text; s text;
begin
  -- A step's settle that enqueues its children and parks the job until they end (queue/children.ts):
  -- fenced like every settle (0 rows when the lease was lost: null, and nothing is written).
  -- The children go through worker.enqueue_jobs, so a child's submit key returns the job that
  -- has it: that job is adopted (joined by this wait, whoever created it), and if it has
  -- already ended it counts as ended now. The wait's join may hold at once (no children, or
  -- enough adopted ones ended): then the job is due at once instead of parked.
  if p_join is null or p_join not in ('all', 'first', 'count') then
    raise exception 'join must be all, first or a number of children' using errcode = 'SB400', column = 'join';
  end if;
  if jsonb_typeof(p_children) is distinct from 'array' then
    raise exception 'children must be an array' using errcode = 'SB400', column = 'children';
  end if;
  if p_step is null or btrim(p_step) = '' then
    raise exception 'next must name the step to resume at' using errcode = 'SB400', column = 'next';
  end if;
  update worker.jobs
     set status = 'queued', step = p_step, checkpoint = checkpoint || coalesce(p_checkpoint, '{}'::jsonb),
         attempts = 0, locked_until = null, running_pool = null,
         run_at = case when cancel_requested_at is not null then v_now else 'infinity'::timestamptz end
   where id = p_id and lease_token = p_token and status = 'running'
  returning * into v_parent;
  if not found then
    return null;
  end if;

  select coalesce(max(w.wait_no), 0) + 1 into v_wait_no from worker.child_joins w where w.parent_id = p_id;
  begin
    select coalesce(array_agg((x.e->>'id')::uuid order by x.o), '{}'),
           count(*) filter (where not (x.e->>'_duplicate')::boolean)::int,
           coalesce(array_agg((x.e->>'id')::uuid) filter (where not (x.e->>'_duplicate')::boolean), '{}')
      into v_ids, v_created, v_new
      from worker.enqueue_jobs(p_children, v_now) with ordinality as x(e, o);
  exception when others then
    get stacked diagnostics m = message_text, c = column_name, s = returned_sqlstate;
    raise exception '%', replace(m, 'jobs[', 'children[') using errcode = s, column = replace(c, 'jobs', 'children');
  end;
  -- A job created here, or an adopted one that is nobody's child yet, gets this parent (the
  -- marker the child trigger's WHEN reads).
  update worker.jobs j set parent_id = p_id
   where j.id = any (v_ids) and j.parent_id is null;

  insert into worker.child_joins (parent_id, wait_no, join_kind, need, total, next_step, created_at)
  values (p_id, v_wait_no, p_join, 0, 0, p_step, v_now);
  insert into worker.job_children (parent_id, wait_no, child_id, position, ended_at)
  select p_id, v_wait_no, s.id, min(s.o - 1)::int, min(j.finished_at)
    from unnest(v_ids) with ordinality as s(id, o) join worker.jobs j on j.id = s.id
   group by s.id;
  select count(*)::int, count(*) filter (where ended_at is not null)::int into v_total, v_ended
    from worker.job_children where parent_id = p_id and wait_no = v_wait_no;
  v_need := case p_join when 'all' then v_total when 'first' then least(1, v_total) else p_count end;
  if v_need is null or (p_join = 'count' and v_need < 1) or v_need > v_total then
    raise exception 'join: a count must be from 1 to the number of distinct children (%), got %', v_total, coalesce(p_count::text, 'none')
      using errcode = 'SB400', column = 'join';
  end if;
  v_joined := v_ended >= v_need;
  update worker.child_joins set need = v_need, total = v_total, ended = v_ended, created = v_created,
                              joined_at = case when v_joined then v_now end
   where parent_id = p_id and wait_no = v_wait_no;
  if v_joined and v_parent.run_at > v_now then
    update worker.jobs set run_at = v_now where id = p_id;
  end if;
  insert into worker.job_events (job_id, at, kind, detail)
  values (p_id, v_now, 'checkpoint', jsonb_build_object('step', p_step, 'runAt', case when v_joined then v_now else v_parent.run_at end,
            'children', jsonb_build_object('wait', v_wait_no, 'total', v_total, 'created', v_created, 'ended', v_ended,
                                           'join', p_join, 'need', v_need, 'joined', v_joined)));
  -- A cancel requested while the step ran (committed before this settle): the parent is due for
  -- its cancel hook, and the children this spawn created end cancelled at once, as
  -- worker.cancel_job cancels the children a parent has when it is cancelled; else they would
  -- run on under a cancelled parent. They are this transaction's rows, which no other statement
  -- can hold, so taking them after the parent's row keeps the lock order safe.
  if v_parent.cancel_requested_at is not null then
    foreach v_child in array v_new loop
      perform worker.cancel_job(v_child, 'parent ' || p_id || ' cancelled: ' || coalesce(v_parent.cancel_reason, 'cancelled by operator'), v_now);
    end loop;
  end if;
  return jsonb_build_object('waitNo', v_wait_no, 'total', v_total, 'created', v_created, 'adopted', v_total - v_created,
                            'ended', v_ended, 'need', v_need, 'joined', v_joined);
end $function$
;
