import type { Sql } from '../../queue/db.ts';

/**
 * Real database errors on demand: a statement-level trigger on worker.jobs that makes UPDATE
 * statements raise a chosen SQLSTATE (`raise exception … using errcode = '40P01'`), so the engine
 * sees genuine PostgresErrors from the server, on claims, settles, bulk batches and maintenance
 * alike. The statements are counted by a sequence, which a rolled-back transaction does not undo:
 * the count survives the very error it injects. Armed with `every` and `count`, every `every`-th
 * UPDATE statement raises until `count` have raised; the codes take turns.
 */
export interface InjectedFaults {
  arm(plan: { count: number; every?: number; codes: string[] }): Promise<void>;
  /** Errors raised since the last arm. */
  raised(): Promise<number>;
  disarm(): Promise<void>;
  /** Drop the trigger and its objects (a file that shares its database with other tests). */
  remove(): Promise<void>;
}

export async function installFaults(sql: Sql): Promise<InjectedFaults> {
  await sql.unsafe(`
    create table public.test_fault_plan (id int primary key, every int not null, raise_count int not null, codes text[] not null);
    create sequence public.test_fault_seq minvalue 0 start 0;
    create function public.test_inject_fault() returns trigger language plpgsql as $$
      declare
        p public.test_fault_plan;
        v bigint;
        code text;
      begin
        select * into p from public.test_fault_plan where id = 1;
        if not found or p.raise_count <= 0 then return null; end if;
        v := nextval('public.test_fault_seq');
        if v % p.every = 0 and v / p.every <= p.raise_count then
          code := p.codes[1 + (v / p.every) % array_length(p.codes, 1)];
          raise exception 'injected fault % (%)', v / p.every, code using errcode = code;
        end if;
        return null;
      end $$;
    create trigger test_inject_fault before update on worker.jobs
      for each statement execute function public.test_inject_fault();`);
  const faults: InjectedFaults = {
    async arm({ count, every = 1, codes }) {
      await sql`select setval('public.test_fault_seq', 0)`;
      await sql`
        insert into public.test_fault_plan (id, every, raise_count, codes) values (1, ${every}, ${count}, ${codes})
        on conflict (id) do update set every = excluded.every, raise_count = excluded.raise_count, codes = excluded.codes`;
    },
    async raised() {
      const [row] = await sql`
        select least(p.raise_count, s.last_value / p.every)::int as n
          from public.test_fault_plan p, public.test_fault_seq s where p.id = 1`;
      return (row?.n as number | undefined) ?? 0;
    },
    async disarm() {
      await sql`delete from public.test_fault_plan`;
    },
    async remove() {
      await sql.unsafe(`
        drop trigger test_inject_fault on worker.jobs;
        drop function public.test_inject_fault();
        drop sequence public.test_fault_seq;
        drop table public.test_fault_plan;`);
    },
  };
  return faults;
}
