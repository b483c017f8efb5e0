// Postgres matrix: the model-based concurrency test (lost jobs, double owners, limits, deadlocks).
import { beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { formatFailure, formatTrail, runModelHistories } from '../../scripts/lib/model/run.ts';

/**
 * Model-based concurrency test of the engine. Seeded histories of concurrent rounds (several
 * connections at once: enqueues with submit, dedupe and concurrency keys, identical resubmits,
 * claims in pools with weight limits, settles, crashes, lease expiry by moving the shared pinned
 * clock, cancels, rescues, prunes of finished jobs and of events; steps that wait for an event
 * with signals to the job and events by (name, key) before, during and racing the wait, and
 * timeouts; spawns of children with a join, children that complete, fail or are cancelled, and
 * parents cancelled while their children run; bulk cancels and bulk retries of a window of jobs
 * racing all of these; staged rounds that replay the interleaving of lock waits in which a bulk
 * cancel of a parent once deadlocked with its child's settle (scripts/lib/lock-stages.ts); a
 * rate-limited type and its 429s) run against the
 * real database through the engine's API; after every round and every history the table, the
 * history and the answers are checked against a reference model (scripts/lib/model/): answered
 * jobs survive, one owner per job, limits hold at sampled moments, no starvation, identical
 * resubmits answer the same job before and after pruning, every event history replays to its
 * row; each wait takes exactly one event, kept events go to the next wait, none is delivered
 * twice or outside the history, a waiting job is never claimed, a timed-out wait resumes
 * timed_out; a bulk operation's answer adds up and no operation fails with a deadlock; a parent resumes once when its join holds, with each child's outcome, and its cancel
 * reaches its children; no window of the rate key holds more than its limit of starts, none
 * starts while a 429 pauses it, and the 429's job keeps its attempt. Each history also counts the
 * cases of signals, children and the rate key it reached; a case no history reached fails the
 * test, so a change to the generator cannot quietly stop exercising one.
 *
 * A seed fixes every choice of the generator; what the database answers under concurrency can
 * still vary, so a failure prints its seed, history and round with the rounds before it.
 * Run longer: `npm run soak -- --model --seconds 300 [--seed N]`; another seed here:
 * MODEL_SEED=N npm test -- test/engine/model.test.ts.
 */

const SEEDS = process.env.MODEL_SEED ? [Number(process.env.MODEL_SEED)] : [1, 2];

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});

/** Each case of signals, children and the rate key, summed over the seeds run. */
const reached = new Map<string, number>();

describe('model-based concurrency test', () => {
  it.each(SEEDS)('seed %i: concurrent histories keep every promise', async (seed) => {
    const report = await runModelHistories(db.sql, () => db.client(1), { seed, histories: 10, rounds: 70 });
    if (report.failures.length) console.log(report.failures.map((f) => `${formatFailure(f)}\n${formatTrail(f)}`).join('\n'));
    console.log(`seed ${seed}: ${report.rounds} rounds, ${report.operations} operations; flows reached ${JSON.stringify(report.coverage)}`);
    expect(report.histories).toBe(10);
    expect(report.failures.map(formatFailure)).toEqual([]);
    for (const [c, n] of Object.entries(report.coverage)) reached.set(c, (reached.get(c) ?? 0) + n);
  }, 180_000); // 16–24 s per seed on a shared 2-core machine (17–22 s before signals, children and rate keys); the budget covers a loaded one

  // Every case was reached, so its checks ran. Over the seeds together, not each: some cases are
  // races the database decides (a child ending in the round its parent is cancelled), and one
  // seed's 70 rounds can miss one while another's reach it.
  it('reached every case of signals, children and the rate key', () => {
    expect(reached.size).toBeGreaterThan(0);
    expect([...reached].filter(([, n]) => n === 0).map(([c]) => c)).toEqual([]);
  });
});
