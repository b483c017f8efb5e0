/**
 * Every kind of alert the Worker raises (rows of worker.alerts), with the title a webhook message
 * and the dashboard show. One list: /metrics exports a zero series for each kind from it, and
 * test/jobs/ops-alerts.test.ts checks README.md and docs/operations.md list exactly these.
 */
export const ALERT_TITLES = {
  poison_job: 'Poison job',
  lease_oom: 'Job killed at the top weight class',
  stuck_job: 'Stuck job',
  deadline_missed: 'Job past its deadline',
  unclaimed_jobs: 'Jobs due but unclaimed',
  schedule_missed: 'Schedule missed',
  schedule_invalid: 'Schedule has an invalid cron spec',
  leader_churn: 'Leader churn',
  maintenance_failed: 'Maintenance pass failed',
} as const satisfies Record<string, string>;

export type AlertKind = keyof typeof ALERT_TITLES;
export const ALERT_KINDS = Object.keys(ALERT_TITLES) as AlertKind[];

/** A kind's title; a kind this list does not know (raised by a newer engine) shows as itself. */
export function alertTitle(kind: string): string {
  return (ALERT_TITLES as Record<string, string>)[kind] ?? kind;
}
