import type { Sql } from './db.ts';
import * as driver from './driver/alerts.ts';
import type { DeadlineSeverity, JsonObject } from './job.ts';

export interface AlertMessage {
  id: number;
  kind: string;
  key: string;
  jobId: string | null;
  /** 'critical' (the manual's P1) or 'warning': a deadline_missed alert's is its job's, every other kind's a warning. */
  severity: DeadlineSeverity;
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
    this.write(JSON.stringify({ level: 'alert', kind: alert.kind, severity: alert.severity, key: alert.key, jobId: alert.jobId, message: alert.message }));
  }
}

/** What one delivery pass did: alerts sent (and marked notified) and sends that threw. */
export interface AlertDeliveryCounts {
  sent: number;
  failed: number;
}

/**
 * A delivery pass in which at least one send threw. The alerts sent before and after it are
 * already marked notified; the failed ones stay pending for the next pass. The message is the
 * first error's (with a count when more than one failed); `errors` holds each one.
 */
export class AlertDeliveryError extends Error implements AlertDeliveryCounts {
  readonly code?: string;
  constructor(
    readonly sent: number,
    readonly failed: number,
    readonly errors: unknown[],
  ) {
    const first = errors[0] instanceof Error ? errors[0].message : String(errors[0]);
    super(failed === 1 ? first : `${failed} alert sends failed, the first: ${first}`, { cause: errors[0] });
    this.name = 'AlertDeliveryError';
    // a database error's SQLSTATE, for the callers that log it
    const code = (errors[0] as { code?: unknown } | null)?.code;
    if (typeof code === 'string') this.code = code;
  }
}

/**
 * Send every open alert not yet notified, once, oldest first. Each alert is its own transaction:
 * its row is locked (skip locked, so concurrent deliverers never send one alert twice), sent, and
 * marked notified before the next is read, so a send that throws, or a pass cut short, never
 * makes the alerts already sent go out again. A failed send rolls back only its own row, which
 * stays pending for the next pass; this pass goes on with the alerts after it, until `maxFailures`
 * sends have failed (default 3: a webhook that is down costs a few timeouts, not one per alert).
 *
 * Returns how many were sent. When any send failed it throws an AlertDeliveryError carrying
 * `sent` and `failed`, so a caller that isolates the pass records it as failed.
 */
export async function deliverPendingAlerts(
  sql: Sql,
  alerts: Alerts,
  options: { limit?: number; now?: Date; maxFailures?: number } = {},
): Promise<number> {
  const limit = options.limit ?? 100;
  const maxFailures = options.maxFailures ?? 3;
  const errors: unknown[] = [];
  let sent = 0;
  let after = 0; // the cursor: a failed alert is not tried twice in one pass
  let stopped = false;
  while (!stopped && sent + errors.length < limit && errors.length < maxFailures) {
    let picked = false;
    const outcome = await sql
      .begin(async (tx) => {
        const alert = await driver.lockNextPendingAlert(tx, after);
        if (!alert) return 'none' as const;
        picked = true;
        after = alert.id;
        await alerts.send(alert);
        await driver.markAlertNotified(tx, alert.id, options.now);
        return 'sent' as const;
      })
      .catch((error: unknown) => {
        errors.push(error);
        // no row was picked: the database failed, not a send, and the next read would too
        if (!picked) stopped = true;
        return 'failed' as const;
      });
    if (outcome === 'none') break;
    if (outcome === 'sent') sent++;
  }
  if (errors.length > 0) throw new AlertDeliveryError(sent, errors.length, errors);
  return sent;
}
