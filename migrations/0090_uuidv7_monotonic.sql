-- Job ids in creation order, not only by millisecond (issue 13, bug 9).
--
-- 0060's worker.uuidv7() put the Unix milliseconds in the first 48 bits and random bits after
-- them, so ids made within one millisecond sorted at random: of 499 adjacent ids of one
-- statement, 209 sorted against the order they were made in, while the README says id order is
-- creation order (listings go newest first by id, keyset pagination walks it).
--
-- Now, as RFC 9562 describes (section 6.2, methods 3 and 1 together):
--   * rand_a, the 12 bits after the version, holds the sub-millisecond fraction of
--     clock_timestamp() (microseconds scaled to 1/4096 ms), so ids of different microseconds
--     sort by time; and
--   * the 60-bit time value (milliseconds << 12 | fraction) never goes backwards within a
--     session: each backend remembers the last value it issued (a session setting), and a value
--     that is not greater (the same microsecond, or a clock stepped back) becomes last + 1. A
--     burst of more than 4,096 ids per millisecond borrows from the next millisecond and the clock
--     catches up; the 62 random bits after the variant stay random.
-- Within a session, then, every id is greater than the one before it: one statement's ids, a
-- loop's, and a transaction's after it. Across sessions ids are ordered by the clock to the
-- microsecond. The remembered value is only a floor: a session that has none (a new connection,
-- a pooled one) starts from the clock, and a rolled-back transaction's setting reverts with it,
-- taking back only ids that were never committed. Nothing else depends on it, so Hyperdrive's
-- transaction pooling is unaffected.
--
-- Cost, counted with callgrind on one backend (4,000 jobs, both versions in the same run): an
-- id takes 45,500 instructions instead of 24,000 (the session setting is most of it), which is
-- +1.3% per single worker.enqueue_job (1.76 M instructions) and +4.9% per job of a keyless
-- worker.enqueue_jobs batch (461 k). Claiming and completing (npm run bench:instructions) do not
-- make ids: 355 k and 350 k instructions per job before and after.
--
-- Not parallel safe any more: a parallel worker cannot set a session setting (ids are made by
-- inserts, which never run in parallel).
create or replace function worker.uuidv7() returns uuid language plpgsql volatile parallel unsafe as $$
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
end $$;
