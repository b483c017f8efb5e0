import { beforeAll, describe, expect, it } from 'vitest';
import { createWorkerHarness, type WorkerHarness } from './support.ts';

/**
 * Job ids (worker.uuidv7(), migrations/0090) are in creation order within a session: the
 * sub-millisecond fraction of the clock in rand_a and a per-session floor, so ties and clock
 * steps never sort backwards (RFC 9562, 6.2).
 */
let h: WorkerHarness;
beforeAll(async () => {
  h = await createWorkerHarness();
});

async function backwards(table: string): Promise<{ n: number; backwards: number; duplicates: number }> {
  const [row] = await h.sql`
    select count(*)::int as n,
           count(*) filter (where id <= prev)::int as backwards,
           (count(*) - count(distinct id))::int as duplicates
      from (select id, lag(id) over (order by seq) as prev from ${h.sql(table)}) x`;
  return row as never;
}

describe('worker.uuidv7()', () => {
  it('10,000 ids of one statement are strictly increasing in the order they were made', async () => {
    await h.sql`create table ids_statement as select seq::int, worker.uuidv7() as id from generate_series(1, 10000) with ordinality as g(x, seq)`;
    expect(await backwards('ids_statement')).toEqual({ n: 10_000, backwards: 0, duplicates: 0 });
  });

  it('10,000 ids of a loop of statements are strictly increasing, and so are ids across transactions of a session', async () => {
    await h.sql`create table ids_loop (seq int primary key, id uuid not null)`;
    await h.sql`do $$ begin for i in 1..10000 loop insert into ids_loop values (i, worker.uuidv7()); end loop; end $$`;
    expect(await backwards('ids_loop')).toEqual({ n: 10_000, backwards: 0, duplicates: 0 });

    // one session, one transaction per statement
    const session = await h.sql.reserve();
    try {
      await session`create table ids_session (seq int primary key, id uuid not null)`;
      for (let i = 1; i <= 200; i++) await session`insert into ids_session values (${i}, worker.uuidv7())`;
    } finally {
      session.release();
    }
    expect(await backwards('ids_session')).toEqual({ n: 200, backwards: 0, duplicates: 0 });
  });

  it('never goes backwards when the clock does: an id is greater than the last one the session made', async () => {
    const session = await h.sql.reserve();
    try {
      const [{ id: before }] = (await session`select worker.uuidv7() as id`) as unknown as [{ id: string }];
      // the session last issued an id a day ahead (as if the clock had been a day fast and was stepped back)
      const ahead = BigInt(Date.now() + 86_400_000) * 4096n;
      await session`select set_config('worker.uuidv7_last', ${ahead.toString()}, false)`;
      const rows = await session`select worker.uuidv7()::text as id from generate_series(1, 3)`;
      const ids = rows.map((r) => r.id as string);
      expect(ids[0]! > before).toBe(true);
      expect([...ids].sort()).toEqual(ids);
      // the ids carry the floor's time (milliseconds, then its 12-bit fraction + 1, + 2, + 3)
      const t = (id: string) => BigInt(`0x${id.replace(/-/g, '').slice(0, 12)}`) * 4096n + BigInt(`0x${id.replace(/-/g, '').slice(13, 16)}`);
      expect(ids.map((id) => t(id) - ahead)).toEqual([1n, 2n, 3n]);
    } finally {
      await session`select set_config('worker.uuidv7_last', '', false)`;
      session.release();
    }
  });

  it('is a version 7, variant 10 UUID whose first 48 bits are the Unix milliseconds', async () => {
    const [row] = await h.sql`select floor(extract(epoch from clock_timestamp()) * 1000)::bigint as before, worker.uuidv7()::text as id,
                                     floor(extract(epoch from clock_timestamp()) * 1000)::bigint as after`;
    const hex = (row!.id as string).replace(/-/g, '');
    expect(hex[12]).toBe('7');
    expect(['8', '9', 'a', 'b']).toContain(hex[16]);
    const ms = Number.parseInt(hex.slice(0, 12), 16);
    expect(ms).toBeGreaterThanOrEqual(Number(row!.before));
    expect(ms).toBeLessThanOrEqual(Number(row!.after));
  });

  it('jobs of one batch enqueue list in the order they were given', async () => {
    const jobs = Array.from({ length: 500 }, (_, i) => ({ type: 'uppercase', payload: { text: `b${i}` }, runAt: '2099-01-01T00:00:00Z' }));
    const rows = await h.sql`select (j->>'id') as id from worker.enqueue_jobs(${h.sql.json(jobs)}::jsonb) j`;
    const ids = rows.map((r) => r.id as string);
    expect([...ids].sort()).toEqual(ids);
    await h.sql`delete from worker.jobs where payload->>'text' like 'b%'`;
  });
});
