import type { Queryable } from './db.ts';
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
  const at = sql`coalesce(${alert.now ?? null}::timestamptz, now())`;
  await sql`
    insert into worker.alerts (kind, key, message, detail, opened_at, last_seen_at)
    values (${alert.kind}, ${alert.key}, ${alert.message}, ${sql.json(alert.detail)}, ${at}, ${at})
    on conflict (kind, key) where resolved_at is null
    do update set last_seen_at = excluded.last_seen_at,
                  ${alert.refreshMessage ? sql`message = excluded.message,` : sql``}
                  occurrences = worker.alerts.occurrences + 1`;
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
  const keys = sql.json(inKeys ? [...options.keys] : [...options.exceptKeys]);
  const rows = await sql`
    update worker.alerts set resolved_at = coalesce(${options.now ?? null}::timestamptz, now())
     where kind = ${options.kind} and resolved_at is null
       and key ${inKeys ? sql`in` : sql`not in`} (select jsonb_array_elements_text(${keys}::jsonb))
    returning id`;
  return rows.length;
}

/** An operator's acknowledgement: the alert is resolved (a new occurrence opens a new alert). False when it was not open. */
export async function resolveAlertById(sql: Queryable, id: number, options: { now?: Date } = {}): Promise<boolean> {
  const rows = await sql`
    update worker.alerts set resolved_at = coalesce(${options.now ?? null}::timestamptz, now())
     where id = ${id} and resolved_at is null returning id`;
  return rows.length > 0;
}
