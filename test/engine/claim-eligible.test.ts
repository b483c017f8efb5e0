import { beforeAll, describe, expect, it } from 'vitest';
import { claimJobs, enqueue, pauseClaims, resumeClaims, type EnqueueInput, type Sql } from '../../queue/index.ts';
import { truncateEngineTables } from '../../queue/driver/tables.ts';
import { Rng } from '../../scripts/lib/model/generator.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';

/**
 * Claim eligibility is defined once, in worker.claim_eligible: the fair claim's lanes and the
 * unclaimed alert call it, and worker.claim_jobs states it inline in its walks (a function with
 * subqueries is not inlined, and calling it per row was 3 to 4 times slower). Seeded random
 * queues check that the claim takes exactly the jobs the predicate admits: pools, type filters,
 * paused types, full and free concurrency keys, dedupe keys with an active job or none; every
 * third queue has no key and no pause, so the claim takes its plain path (worker.claim_plain).
 * Each key has at most one waiting job here, so "admitted" and "taken" are the same set.
 */

const T0 = new Date('2031-09-01T00:00:00Z');
const TYPES = ['elig_a', 'elig_b'];
let db: TestDatabase;
let sql: Sql;
beforeAll(async () => {
  db = await createTestDatabase();
  sql = db.sql;
  await sql`insert into worker.job_types (type, lease_ms, max_attempts) select t, 60000, 3 from unnest(${TYPES}::text[]) t on conflict do nothing`;
});

class Rollback extends Error {}

async function trial(seed: number): Promise<{ admitted: string[]; taken: string[]; runner: object }> {
  const rng = new Rng(seed);
  // every third queue has no concurrency key and no pause: the claim's plain path (worker.claim_plain)
  const plain = seed % 3 === 0;
  await truncateEngineTables(sql);
  await sql`delete from worker.pauses`;
  const keys = ['k1', 'k2', 'k3', 'k4'].map((k) => ({ key: k, limit: rng.int(1, 2) }));
  // running jobs first: each key gets 0 to 2 of them, each dedupe key an active job or none
  const running: EnqueueInput[] = [];
  for (const { key, limit } of plain ? [] : keys) for (let i = rng.int(0, 2); i > 0; i--) running.push({ type: 'elig_a', payload: {}, concurrencyKey: key, concurrencyLimit: limit });
  for (const d of ['d1', 'd2', 'd3']) if (rng.chance(0.5)) running.push({ type: 'elig_a', payload: {}, dedupeKey: d });
  for (const input of running) await enqueue(sql, input, { now: T0 });
  await claimJobs(sql, { workerId: 'busy', limit: running.length + 1, now: T0 });
  // then the queue: at most one waiting job per key, so a claim may take every one admitted
  const freeKeys = [...keys];
  const freeDedupe = ['d1', 'd2', 'd3'];
  for (let i = 0; i < 30; i++) {
    const input: EnqueueInput = { type: rng.pick(TYPES), payload: {}, pool: rng.pick([undefined, undefined, 'p1', 'p2']) };
    if (!plain && freeKeys.length && rng.chance(0.3)) {
      const { key, limit } = freeKeys.splice(rng.int(0, freeKeys.length - 1), 1)[0]!;
      Object.assign(input, { concurrencyKey: key, concurrencyLimit: limit });
    } else if (freeDedupe.length && rng.chance(0.2)) {
      input.dedupeKey = freeDedupe.splice(rng.int(0, freeDedupe.length - 1), 1)[0]!;
    }
    await enqueue(sql, input, { now: T0 });
  }
  if (!plain && rng.chance(0.3)) await pauseClaims(sql, { kind: 'type', name: rng.pick(TYPES), pausedBy: 'test', reason: 'eligibility' });
  const runner = { pool: rng.pick([null, 'p1']), types: rng.chance(0.3) ? [rng.pick(TYPES)] : null };
  const now = new Date(T0.getTime() + 1000);
  const skip = (await sql`select coalesce(array_agg(name), null) as t from worker.pauses where kind = 'type'`)[0]!.t as string[] | null;
  const admitted = (await sql`
    select j.id from worker.jobs j
     where j.status = 'queued' and j.run_at <= ${now}
       and worker.claim_eligible(j, ${runner.pool}, ${runner.types}::text[], ${now}, null, null, ${skip}::text[], '{}')
     order by j.id`).map((r) => r.id as string);
  let taken: string[] = [];
  await sql.begin(async (tx) => {
    taken = (await claimJobs(tx, { workerId: 'probe', limit: 1000, pool: runner.pool, types: runner.types ?? undefined, now })).map((j) => j.id).sort();
    throw new Rollback();
  }).catch((e: unknown) => { if (!(e instanceof Rollback)) throw e; });
  return { admitted, taken, runner };
}

describe('claim eligibility, defined once', () => {
  it('the claim takes exactly the jobs worker.claim_eligible admits, over 40 seeded queues', async () => {
    let nonEmpty = 0;
    let excluded = 0;
    for (let seed = 1; seed <= 40; seed++) {
      const { admitted, taken, runner } = await trial(seed);
      expect({ seed, runner, taken }).toEqual({ seed, runner, taken: admitted });
      if (admitted.length) nonEmpty++;
      const queued = (await sql`select count(*)::int as n from worker.jobs where status = 'queued'`)[0]!.n as number;
      excluded += queued - admitted.length;
    }
    // the seeds reach both sides: jobs admitted and jobs held back
    expect(nonEmpty).toBeGreaterThan(30);
    expect(excluded).toBeGreaterThan(100);
  });

  it('a pause or a concurrency key that appears while runners claim binds the very next claim', async () => {
    await truncateEngineTables(sql);
    await sql`delete from worker.pauses`;
    const now = new Date(T0.getTime() + 1000);
    for (let i = 0; i < 3; i++) await enqueue(sql, { type: 'elig_a', payload: { i } }, { now: T0 });
    expect(await claimJobs(sql, { workerId: 'r', limit: 1, now })).toHaveLength(1); // the plain path
    await pauseClaims(sql, { kind: 'type', name: 'elig_a', pausedBy: 'test', reason: 'mid-run' });
    expect(await claimJobs(sql, { workerId: 'r', limit: 10, now })).toHaveLength(0);
    await resumeClaims(sql, 'type', 'elig_a');
    for (let i = 0; i < 3; i++) await enqueue(sql, { type: 'elig_b', payload: { i }, concurrencyKey: 'kk', concurrencyLimit: 1 }, { now: T0 });
    const taken = await claimJobs(sql, { workerId: 'r', limit: 10, now });
    expect(taken.map((j) => j.type).sort()).toEqual(['elig_a', 'elig_a', 'elig_b']);
  });
});
