CREATE OR REPLACE FUNCTION worker.prepare_enqueue_element(e jsonb, p_now timestamp with time zone, OUT job worker.jobs, OUT request jsonb)
 RETURNS record
 LANGUAGE plpgsql
AS $function$
declare
  v_p record;
begin
  if jsonb_typeof(e) <> 'object' then
    raise exception 'a job must be a JSON object, got %', jsonb_typeof(e) using errcode = 'SB400', column = '';
  end if;
  -- (a helper only for a field that is there: most elements carry just type and payload)
  select * into v_p from worker.prepare_enqueue(
    worker.enqueue_text(e, 'type'), coalesce(e->'payload', '{}'::jsonb),
    case when e ? 'priority' then worker.enqueue_int(e, 'priority', -2147483648, 2147483647)::int end,
    case when e ? 'runAt' then worker.enqueue_time(e, 'runAt') end,
    case when e ? 'maxAttempts' then worker.enqueue_int(e, 'maxAttempts', -2147483648, 2147483647)::int end,
    case when e ? 'dedupeKey' then worker.enqueue_text(e, 'dedupeKey') end,
    case when e ? 'submitKey' then worker.enqueue_text(e, 'submitKey') end,
    case when e ? 'pool' then worker.enqueue_text(e, 'pool') end,
    case when e ? 'weight' then worker.enqueue_text(e, 'weight') end,
    case when e ? 'concurrencyKey' then worker.enqueue_text(e, 'concurrencyKey') end,
    case when e ? 'concurrencyLimit' then worker.enqueue_int(e, 'concurrencyLimit', -2147483648, 2147483647)::int end,
    case when e ? 'delayMs' then worker.enqueue_int(e, 'delayMs', -9223372036854775808, 9223372036854775807)::bigint end,
    p_now);
  select * into v_p from worker.prepare_deadline(v_p.job, v_p.request,
    case when e ? 'deadlineMs' then worker.enqueue_int(e, 'deadlineMs', -9223372036854775808, 9223372036854775807)::bigint end,
    case when e ? 'deadlineSeverity' then worker.enqueue_text(e, 'deadlineSeverity') end);
  if e ? 'rateLimit' or e ? 'fairnessKey' then
    select * into v_p from worker.prepare_flow_keys(v_p.job, v_p.request, e->'rateLimit',
      case when e ? 'fairnessKey' then worker.enqueue_text(e, 'fairnessKey') end);
  end if;
  job := v_p.job;
  request := v_p.request;
end $function$
;
