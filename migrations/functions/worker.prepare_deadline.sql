CREATE OR REPLACE FUNCTION worker.prepare_deadline(p_job worker.jobs, p_request jsonb, p_deadline_ms bigint, p_deadline_severity text, OUT job worker.jobs, OUT request jsonb)
 RETURNS record
 LANGUAGE plpgsql
AS $function$
declare
  v_type_ms       bigint;
  v_type_severity text;
begin
  -- The deadline of a job prepared by worker.prepare_enqueue (0180): the job's own deadlineMs
  -- and deadlineSeverity, each one falling back to its type's, resolved to an instant from the
  -- job's enqueue (created_at), so the tick compares a column and never joins the types.
  job := p_job;
  request := p_request;
  if p_deadline_ms is not null and p_deadline_ms not between 1 and 2592000000 then
    raise exception 'deadlineMs must be an integer from 1 to 2592000000 (30 days), got %', p_deadline_ms
      using errcode = 'SB400', column = 'deadlineMs';
  end if;
  if p_deadline_severity is not null and p_deadline_severity not in ('warning', 'critical') then
    raise exception 'deadlineSeverity must be ''warning'' or ''critical'', got "%"', left(p_deadline_severity, 100)
      using errcode = 'SB400', column = 'deadlineSeverity';
  end if;
  select t.deadline_ms, t.deadline_severity into v_type_ms, v_type_severity from worker.job_types t where t.type = p_job.type;
  if coalesce(p_deadline_ms, v_type_ms) is null then
    if p_deadline_severity is not null then
      raise exception 'deadlineSeverity needs a deadline: give deadlineMs (job type "%" declares none)', p_job.type
        using errcode = 'SB400', column = 'deadlineSeverity';
    end if;
    return;
  end if;
  job.deadline_at := p_job.created_at + make_interval(secs => coalesce(p_deadline_ms, v_type_ms) / 1000.0);
  job.deadline_severity := coalesce(p_deadline_severity, v_type_severity, 'warning');
  -- Part of "the same request" for a submit key only when given, so a key stored before 0180
  -- still matches its retry.
  request := p_request || jsonb_strip_nulls(jsonb_build_object('deadlineMs', p_deadline_ms, 'deadlineSeverity', p_deadline_severity));
end $function$
;
