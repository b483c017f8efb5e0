import type { Sql } from './db.ts';
import type { JsonObject } from './job.ts';

export interface AlertMessage {
  id: number;
  kind: string;
  key: string;
  jobId: string | null;
  message: string;
  detail: JsonObject;
  openedAt: Date;
}

/** The platform alert port: where poison jobs, stuck and unclaimed jobs and missed schedules are reported. */
export interface Alerts {
  send(alert: AlertMessage): Promise<void>;
}

/** Writes each alert as one JSON line on stderr: the default when no webhook is configured. */
export class LogAlerts implements Alerts {
  constructor(private readonly write: (line: string) => void = (line) => console.error(line)) {}
  async send(alert: AlertMessage): Promise<void> {
    this.write(JSON.stringify({ level: 'alert', kind: alert.kind, key: alert.key, jobId: alert.jobId, message: alert.message }));
  }
}

/**
 * Send every open alert not yet notified, once. The rows are locked while sending and marked
 * notified in the same transaction, so concurrent deliverers never send one alert twice and a
 * failed send is retried on the next pass.
 */
export async function deliverPendingAlerts(sql: Sql, alerts: Alerts, options: { limit?: number; now?: Date } = {}): Promise<number> {
  return (await sql.begin(async (tx) => {
    const rows = await tx`
      select * from worker.alerts where notified_at is null and resolved_at is null
       order by id limit ${options.limit ?? 100} for update skip locked`;
    for (const row of rows) {
      await alerts.send({
        id: Number(row.id),
        kind: row.kind as string,
        key: row.key as string,
        jobId: (row.job_id as string | null) ?? null,
        message: row.message as string,
        detail: row.detail as JsonObject,
        openedAt: row.opened_at as Date,
      });
    }
    if (rows.length > 0) {
      // ids travel as a JSON array: array parameters need the server's type list, which the
      // Worker's client does not fetch
      await tx`update worker.alerts set notified_at = coalesce(${options.now ?? null}::timestamptz, now())
                where id in (select jsonb_array_elements_text(${tx.json(rows.map((r) => Number(r.id)))}::jsonb)::bigint)`;
    }
    return rows.length;
  })) as number;
}
