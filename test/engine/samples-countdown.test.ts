import { beforeAll, describe, expect, it } from 'vitest';
import { enqueue, getJob, runSteps } from '../../queue/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { sampleRunner } from '../support/registry.ts';

// `countdown` is the built-in multi-step sample (the end-to-end bench's clock figure runs it on
// every tree): each step is a `continue` with the payload's delay and the step number as its
// checkpoint, so a job of n steps is claimed n + 1 times, delayMs apart.

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});

const T0 = new Date('2030-01-01T00:00:00Z');
const at = (ms: number) => new Date(T0.getTime() + ms);

describe('countdown sample', () => {
  it('runs its steps delayMs apart, each checkpointed, and finishes with the step count', async () => {
    const { job } = await enqueue(db.sql, { type: 'countdown', payload: { n: 3, delayMs: 2000 } }, { now: T0 });
    const runAt = async (ms: number) => runSteps(sampleRunner(db.sql, { clock: () => at(ms) }));

    for (const [step, ms] of [[1, 0], [2, 2000], [3, 4000]] as const) {
      expect(await runAt(ms)).toMatchObject({ claimed: 1, continued: 1 });
      const { job: row } = (await getJob(db.sql, job.id))!;
      expect(row).toMatchObject({ status: 'queued', checkpoint: { taken: step }, attempts: 0 });
      expect(row.runAt).toEqual(at(ms + 2000));
      // not due a millisecond early
      expect(await runAt(ms + 1999)).toMatchObject({ claimed: 0 });
    }
    expect(await runAt(6000)).toMatchObject({ claimed: 1, done: 1 });
    const after = (await getJob(db.sql, job.id))!;
    expect(after.job).toMatchObject({ status: 'done', result: { steps: 3 } });
    expect(after.events.filter((e) => e.kind === 'claimed').map((e) => e.at)).toEqual([at(0), at(2000), at(4000), at(6000)]);
  });

  it('without delayMs, steps are due at once', async () => {
    const { job } = await enqueue(db.sql, { type: 'countdown', payload: { n: 2 } }, { now: T0 });
    expect(await runSteps(sampleRunner(db.sql, { clock: () => T0 }))).toMatchObject({ claimed: 3, continued: 2, done: 1 });
    expect((await getJob(db.sql, job.id))!.job).toMatchObject({ status: 'done', result: { steps: 2 } });
  });
});
