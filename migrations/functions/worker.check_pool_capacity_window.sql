CREATE OR REPLACE FUNCTION worker.check_pool_capacity_window()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
declare
  v_other worker.pool_capacity_windows;
begin
  -- One writer of a pool's windows at a time (claims of the pool lock the same row): two
  -- overlapping windows written at once cannot both pass the check below.
  perform 1 from worker.pool_capacity pc where pc.pool = new.pool for update;
  -- Two windows (arcs of the day) share a moment exactly when one starts inside the other.
  select * into v_other from worker.pool_capacity_windows w
   where w.pool = new.pool
     and (tg_op = 'INSERT' or (w.pool, w.name) <> (old.pool, old.name))
     and (worker.in_time_window(new.starts, w.starts, w.ends) or worker.in_time_window(w.starts, new.starts, new.ends))
   order by w.starts limit 1;
  if found then
    raise exception 'window "%" (% to %) of pool "%" overlaps its window "%" (% to %): a pool''s windows must not overlap',
      new.name, to_char(new.starts, 'HH24:MI'), to_char(new.ends, 'HH24:MI'), new.pool,
      v_other.name, to_char(v_other.starts, 'HH24:MI'), to_char(v_other.ends, 'HH24:MI')
      using errcode = 'SB400', column = 'starts';
  end if;
  return new;
end $function$
;
