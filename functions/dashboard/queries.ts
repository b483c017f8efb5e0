/**
 * What the dashboard reads: the engine's read side (queue/dashboard-read.ts, queue/inspect.ts),
 * re-exported under the names the pages use. No SQL here: the engine owns worker.*.
 */
export {
  countsByStatus, depthSince, getJob, inProgressJobs, jobTypes, listJobs, openAlerts, pastDeadlineJobs, scheduleReports, stepSeries,
  type DepthPoint, type OpenAlert, type PastDeadline, type StatusCounts,
} from '../../queue/index.ts';
export { resolveAlertById as resolveAlert } from '../../queue/index.ts';
