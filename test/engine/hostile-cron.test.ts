import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  backfillSlots, checkSchedules, CronSpecError, latestSlot, SCHEDULES, syncSchedules, type Schedule,
} from '../../functions/schedules.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { hostileString } from '../support/hostile.ts';

/**
 * Cron specs, good and garbage. latestSlot either answers a slot at or before the time asked (or
 * null for a spec with no slot, like 30 February) or throws a CronSpecError naming the spec —
 * quickly, whatever the spec. In the tick, one schedule with a bad spec is reported (an alert and
 * `invalid`) while the other schedules still backfill and are checked.
 */

const CRON_TOKENS = ['*', '*/5', '*/0', '0', '1', '7', '15', '23', '29', '30', '31', '59', '60', '61', '1-5', '5-1', '1,2,3', 'L', 'W', '5W', 'L-2',
  '#', 'MON#2', 'MON#6', '?', 'JAN', 'FEB', 'SUN-SAT', '0/0', '2/3', '-1', '1e3', '@daily', '@reboot', ''];

const cronLike = fc.oneof(
  fc.array(fc.oneof(fc.constantFrom(...CRON_TOKENS), hostileString), { minLength: 1, maxLength: 8 }).map((parts) => parts.join(' ')),
  fc.array(fc.constantFrom(...CRON_TOKENS), { minLength: 5, maxLength: 7 }).map((parts) => parts.join(' ')),
  hostileString,
);

describe('latestSlot with any spec', () => {
  it('answers a slot no later than asked, null, or a CronSpecError naming the spec — never another error (property)', () => {
    // Whether random specs happen to include a valid one depends on the run's seed (a run once got
    // none), so the property checks only what every answer must be; the examples below pin both kinds.
    // A spec that made latestSlot hang would fail the test by its timeout.
    fc.assert(
      fc.property(cronLike, fc.date({ min: new Date('2000-01-01'), max: new Date('2100-01-01'), noInvalidDate: true }), (spec, at) => {
        try {
          const slot = latestSlot({ name: 'fuzzed', cron: spec }, at);
          if (slot) expect(slot.getTime()).toBeLessThanOrEqual(at.getTime() + 1000);
        } catch (error) {
          expect(error).toBeInstanceOf(CronSpecError);
          expect((error as Error).message).toContain(`schedule fuzzed has an invalid cron spec ${JSON.stringify(spec)}`);
        }
      }),
      { numRuns: 1500 },
    );
  });

  it('answers the latest slot of a valid spec, and refuses garbage with a CronSpecError naming it', () => {
    const at = new Date('2026-11-15T10:07:30Z');
    expect(latestSlot({ name: 'fuzzed', cron: '*/15 * * * *' }, at)?.toISOString()).toBe('2026-11-15T10:00:00.000Z');
    expect(latestSlot({ name: 'fuzzed', cron: '0 0 1 * *' }, at)?.toISOString()).toBe('2026-11-01T00:00:00.000Z');
    for (const spec of ['*/0 * * * *', '61 * * * *', 'MON#6 * * * *', '']) {
      expect(() => latestSlot({ name: 'fuzzed', cron: spec }, at)).toThrow(CronSpecError);
    }
  });

  it('answers null for a spec that parses but never fires', () => {
    expect(latestSlot({ cron: '0 0 30 2 *' }, new Date('2026-11-30T00:00:00Z'))).toBeNull();
  });

  it('parses every shipped schedule', () => {
    for (const s of SCHEDULES) expect(latestSlot(s, new Date('2026-11-30T12:00:00Z'))).toBeInstanceOf(Date);
  });
});

describe('a schedule with a bad spec in the tick', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });

  it('is reported with an alert naming spec and reason, while the other schedules still backfill and are checked', async () => {
    const broken: Schedule = { name: 'broken', cron: '61 * * * *', type: 'uppercase', slotKey: () => 'broken', payload: () => ({ text: 'x' }) };
    const schedules = [broken, ...SCHEDULES];
    const now = new Date('2026-12-01T00:05:00Z');
    await syncSchedules(db.sql, schedules);
    const backfilled = await backfillSlots(db.sql, now, 86_400_000, schedules);
    expect(backfilled.map((s) => s.slotKey).sort()).toEqual(['billing_cron:2026-11', 'cleanup:2026-12-01T00:00Z']);
    const checked = await checkSchedules(db.sql, now, 3_600_000, schedules);
    expect(checked.invalid).toEqual(['broken']);
    const alerts = await db.sql`select kind, key, message, detail from worker.alerts where kind = 'schedule_invalid'`;
    expect(alerts).toEqual([
      { kind: 'schedule_invalid', key: 'broken', message: expect.stringMatching(/^schedule broken has an invalid cron spec "61 \* \* \* \*": .*61/), detail: { cron: '61 * * * *' } },
    ]);
    // a second check is the same open alert, seen again
    await checkSchedules(db.sql, now, 3_600_000, schedules);
    const [again] = await db.sql`select count(*)::int as n, max(occurrences)::int as seen from worker.alerts where kind = 'schedule_invalid'`;
    expect(again).toEqual({ n: 1, seen: 2 });
  });
});
