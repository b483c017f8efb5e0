import type { Queryable } from './db.ts';
import * as driver from './driver/alerts.ts';
import type { JsonObject } from './job.ts';

/**
 * Opening and resolving rows of worker.alerts. At most one alert of a kind and key is open at a
 * time (the partial unique index alerts_open_uq): raising it again counts an occurrence.
 */

export interface RaisedAlert {
  kind: string;
  key: string;
  message: string;
  detail: JsonObject;
  /** Also replace the open alert's message with this one (default: keep the first message). */
  refreshMessage?: boolean;
  now?: Date;
}

/** Open an alert, or see the open one of its kind and key again. */
export async function raiseAlert(sql: Queryable, alert: RaisedAlert): Promise<void> {
  await driver.upsertAlert(sql, alert);
}

/**
 * Resolve the open alerts of a kind: those whose key is in `keys`, or (with `exceptKeys`) every
 * one whose key is not. Returns how many were resolved.
 */
export async function resolveAlerts(
  sql: Queryable,
  options: { kind: string; now?: Date } & ({ keys: readonly string[] } | { exceptKeys: readonly string[] }),
): Promise<number> {
  const inKeys = 'keys' in options;
  const keys = inKeys ? options.keys : options.exceptKeys;
  return driver.resolveAlertsByKey(sql, { kind: options.kind, keys, inKeys, now: options.now });
}

/** An operator's acknowledgement: the alert is resolved (a new occurrence opens a new alert). False when it was not open. */
export async function resolveAlertById(sql: Queryable, id: number, options: { now?: Date } = {}): Promise<boolean> {
  return driver.resolveAlertById(sql, id, options.now);
}
