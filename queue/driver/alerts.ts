import type { Queryable } from '../db.ts';
import type { AlertMessage } from '../alerts.ts';
import type { RaisedAlert } from '../alert-rows.ts';
import type { OpenAlert } from '../dashboard-read.ts';
import type { JsonObject } from '../job.ts';
import { at } from './clock.ts';
import { deadlineSeverityOrNull } from './rows.ts';

const alertSeverity = (value: unknown) => deadlineSeverityOrNull(value, 'severity') ?? 'warning';

/**
 * worker.alerts: at most one alert of a kind and key is open at a time (the partial unique index
 * alerts_open_uq), so raising it again counts an occurrence.
 */

/** Open an alert, or see the open one of its kind and key again. */
export async function upsertAlert(sql: Queryable, alert: RaisedAlert): Promise<void> {
  const now = at(sql, alert.now);
  await sql`
    insert into worker.alerts (kind, key, message, detail, opened_at, last_seen_at)
    values (${alert.kind}, ${alert.key}, ${alert.message}, ${sql.json(alert.detail)}, ${now}, ${now})
    on conflict (kind, key) where resolved_at is null
    do update set last_seen_at = excluded.last_seen_at,
                  ${alert.refreshMessage ? sql`message = excluded.message,` : sql``}
                  occurrences = worker.alerts.occurrences + 1`;
}

/** Resolve the open alerts of a kind whose key is (or, `inKeys` false, is not) in `keys`; how many. */
export async function resolveAlertsByKey(
  sql: Queryable,
  options: { kind: string; keys: readonly string[]; inKeys: boolean; now: Date | undefined },
): Promise<number> {
  const rows = await sql`
    update worker.alerts set resolved_at = ${at(sql, options.now)}
     where kind = ${options.kind} and resolved_at is null
       and key ${options.inKeys ? sql`in` : sql`not in`} (select jsonb_array_elements_text(${sql.json([...options.keys])}::jsonb))
    returning id`;
  return rows.length;
}

/** Resolve one open alert; false when it was not open. */
export async function resolveAlertById(sql: Queryable, id: number, now: Date | undefined): Promise<boolean> {
  const rows = await sql`update worker.alerts set resolved_at = ${at(sql, now)} where id = ${id} and resolved_at is null returning id`;
  return rows.length > 0;
}

interface PendingRow {
  id: string | number;
  kind: string;
  key: string;
  severity: string;
  job_id: string | null;
  message: string;
  detail: JsonObject;
  opened_at: Date;
}

/**
 * The oldest open alert not yet notified after id `after`, locked for this transaction (skip
 * locked: concurrent deliverers never pick one alert twice); null when none is left.
 */
export async function lockNextPendingAlert(tx: Queryable, after: number): Promise<AlertMessage | null> {
  const [row] = await tx<PendingRow[]>`
    select id, kind, key, severity, job_id, message, detail, opened_at from worker.alerts
     where notified_at is null and resolved_at is null and id > ${after}
     order by id limit 1 for update skip locked`;
  if (!row) return null;
  return {
    id: Number(row.id),
    kind: row.kind,
    key: row.key,
    severity: alertSeverity(row.severity),
    jobId: row.job_id ?? null,
    message: row.message,
    detail: row.detail,
    openedAt: row.opened_at,
  };
}

export async function markAlertNotified(tx: Queryable, id: number, now: Date | undefined): Promise<void> {
  await tx`update worker.alerts set notified_at = ${at(tx, now)} where id = ${id}`;
}

interface OpenAlertRow {
  id: string | number;
  kind: string;
  key: string;
  severity: string;
  job_id: string | null;
  message: string;
  opened_at: Date;
  last_seen_at: Date;
  notified_at: Date | null;
  occurrences: number;
}

/** The open alerts, newest first (at most `limit`). */
export async function openAlerts(sql: Queryable, limit: number): Promise<OpenAlert[]> {
  const rows = await sql<OpenAlertRow[]>`
    select id, kind, key, severity, job_id, message, opened_at, last_seen_at, notified_at, occurrences
      from worker.alerts where resolved_at is null order by opened_at desc, id desc limit ${limit}`;
  return rows.map((r) => ({
    id: Number(r.id),
    kind: r.kind,
    key: r.key,
    severity: alertSeverity(r.severity),
    jobId: r.job_id ?? null,
    message: r.message,
    openedAt: r.opened_at,
    lastSeenAt: r.last_seen_at,
    notifiedAt: r.notified_at ?? null,
    occurrences: r.occurrences,
  }));
}
