import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { deliverPendingAlerts, type AlertMessage, type Alerts } from '../../queue/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';

/** deliverPendingAlerts against a real database: each open alert is sent once, even when a send in the pass fails. */
let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
beforeEach(async () => {
  await db.sql`delete from worker.alerts`;
});

const T0 = new Date('2026-11-01T00:00:00Z');

/** The Alerts port, recording every send it was asked for; `failing` keys throw (once each, or always). */
class RecordingAlerts implements Alerts {
  attempts: AlertMessage[] = [];
  constructor(private readonly failing: Map<string, number> = new Map()) {}
  async send(alert: AlertMessage): Promise<void> {
    this.attempts.push(alert);
    const left = this.failing.get(alert.key) ?? 0;
    if (left > 0) {
      this.failing.set(alert.key, left - 1);
      throw new Error(`webhook refused ${alert.key}`);
    }
  }
  keys(): string[] {
    return this.attempts.map((a) => a.key);
  }
}

async function openAlerts(keys: string[]): Promise<void> {
  for (const key of keys) {
    await db.sql`insert into worker.alerts (kind, key, message, opened_at, last_seen_at)
                 values ('stuck_job', ${key}, ${`alert ${key}`}, ${T0}, ${T0})`;
  }
}

const pending = async () =>
  (await db.sql`select key from worker.alerts where notified_at is null and resolved_at is null order by id`).map((r) => r.key as string);

describe('deliverPendingAlerts', () => {
  it('records each send as it happens: a failed send stays pending and the alerts sent before it are not sent again', async () => {
    await openAlerts(['a', 'b', 'c']);
    const alerts = new RecordingAlerts(new Map([['b', 1]]));

    const error = await deliverPendingAlerts(db.sql, alerts, { now: T0 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toBe('webhook refused b');
    expect(await pending()).toEqual(['b']); // a and c are recorded as sent
    expect(alerts.keys()).toEqual(['a', 'b', 'c']); // the pass went on past the failed one

    expect(await deliverPendingAlerts(db.sql, alerts, { now: T0 })).toBe(1);
    expect(await deliverPendingAlerts(db.sql, alerts, { now: T0 })).toBe(0);
    // each alert delivered exactly once; b was attempted twice (refused, then sent)
    expect(alerts.keys()).toEqual(['a', 'b', 'c', 'b']);
    expect(await pending()).toEqual([]);
    const [row] = await db.sql`select count(*)::int as n from worker.alerts where notified_at = ${T0}`;
    expect(row!.n).toBe(3);
    // the failed pass still reported what it did
    expect(error).toMatchObject({ sent: 2, failed: 1 });
  });

  it('an alert that fails every pass never makes the others be sent again', async () => {
    await openAlerts(['a', 'bad', 'c']);
    const alerts = new RecordingAlerts(new Map([['bad', Infinity]]));
    for (let i = 0; i < 3; i++) {
      await expect(deliverPendingAlerts(db.sql, alerts)).rejects.toThrow('webhook refused bad');
    }
    expect(alerts.keys()).toEqual(['a', 'bad', 'c', 'bad', 'bad']);
    expect(await pending()).toEqual(['bad']);
  });

  it('stops a pass after maxFailures failed sends (a webhook that is down), leaving the rest pending for the next pass', async () => {
    const keys = ['k1', 'k2', 'k3', 'k4', 'k5', 'k6'];
    await openAlerts(keys);
    const down = new RecordingAlerts(new Map(keys.map((k) => [k, Infinity])));
    await expect(deliverPendingAlerts(db.sql, down, { maxFailures: 3 })).rejects.toMatchObject({ sent: 0, failed: 3 });
    expect(down.keys()).toEqual(['k1', 'k2', 'k3']);
    expect(await pending()).toEqual(keys);

    const up = new RecordingAlerts();
    expect(await deliverPendingAlerts(db.sql, up)).toBe(6);
    expect(up.keys()).toEqual(keys);
  });

  it('two concurrent passes never send one alert twice', async () => {
    const keys = Array.from({ length: 12 }, (_, i) => `c${i}`);
    await openAlerts(keys);
    const other = db.client(2);
    const alerts = new RecordingAlerts();
    const [a, b] = await Promise.all([deliverPendingAlerts(db.sql, alerts), deliverPendingAlerts(other, alerts)]);
    expect(a + b).toBe(12);
    expect([...alerts.keys()].sort()).toEqual([...keys].sort());
    expect(await pending()).toEqual([]);
  });
});
