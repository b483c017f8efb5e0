CREATE OR REPLACE FUNCTION worker.resume_claims(p_kind text, p_name text)
 RETURNS worker.pauses
 LANGUAGE plpgsql
AS $function$
-- Resume a paused job type or pool: the next claim takes its jobs again. Answers the pause it ended.
declare
  v_row worker.pauses;
begin
  if p_kind is null or p_kind not in ('type', 'pool') then
    raise exception 'kind must be ''type'' or ''pool'', got %', coalesce(p_kind, 'null') using errcode = 'SB400', column = 'kind';
  end if;
  delete from worker.pauses p where p.kind = p_kind and p.name = p_name returning * into v_row;
  if not found then
    raise exception '% "%" is not paused', p_kind, coalesce(p_name, 'null') using errcode = 'SB409', column = 'name';
  end if;
  return v_row;
end $function$
;
