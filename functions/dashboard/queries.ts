/**
 * What the dashboard reads: the engine's read side (queue/dashboard-read.ts, queue/inspect.ts,
 * and the workflow and flow-control reads), re-exported under the names the pages use. No SQL
 * here: the engine owns worker.*.
 */
export {
  bulkSample, countsByStatus, deadLetters, depthSince, getJob, inProgressJobs, jobFamily, jobTypes, jobWait, listJobs, listPauses, listRateLimits,
  openAlerts, pastDeadlineJobs, scheduleReports, stepSeries,
  type DeadLetterGroup, type DepthPoint, type JobFamily, type JobWait, type OpenAlert, type PastDeadline, type Pause, type RateLimitState, type StatusCounts,
} from '../../queue/index.ts';
export { resolveAlertById as resolveAlert } from '../../queue/index.ts';
