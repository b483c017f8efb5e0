CREATE OR REPLACE FUNCTION worker.lock_signal_channel(p_name text, p_key text)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
begin
  -- The (name, key) pair's row, locked until the transaction ends: a wait settling on the pair
  -- and an event sent to it serialize here, so one always sees what the other wrote (a wait
  -- finds the kept event, or the event finds the wait). Taken before any job row.
  -- The prune deletes a channel with no waits and no events (worker.prune_signals, 0240): one it
  -- deleted between this insert and the lock is found gone by the lock, and made again.
  loop
    insert into worker.signal_channels (name, key) values (p_name, p_key) on conflict do nothing;
    perform 1 from worker.signal_channels where name = p_name and key = p_key for update;
    exit when found;
  end loop;
end $function$
;
