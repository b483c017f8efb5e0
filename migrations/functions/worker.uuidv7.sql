CREATE OR REPLACE FUNCTION worker.uuidv7()
 RETURNS uuid
 LANGUAGE plpgsql
AS $function$
declare
  v_us   bigint := (extract(epoch from clock_timestamp()) * 1000000)::bigint;
  -- milliseconds << 12 | the sub-millisecond fraction in 1/4096 ms
  v_t    bigint := (v_us / 1000) * 4096 + (v_us % 1000) * 4096 / 1000;
  v_last bigint := nullif(current_setting('worker.uuidv7_last', true), '')::bigint;
begin
  if v_t <= v_last then
    v_t := v_last + 1;
  end if;
  perform set_config('worker.uuidv7_last', v_t::text, false);
  return encode(
    substring(int8send(v_t >> 12) from 3)                                  -- unix_ts_ms, 48 bits
    || substring(int4send((28672 | (v_t & 4095))::int) from 3)             -- ver 0111 + rand_a, 16 bits
    || substring(uuid_send(gen_random_uuid()) from 9),                     -- var 10 + rand_b, 64 bits
    'hex')::uuid;
end $function$
;
