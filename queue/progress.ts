import { PARKED_MS, type Job } from './job.ts';

/**
 * How far a job has got, as the API, the dashboard and the metrics show it. The row's `attempts`
 * counts the tries the current step has started — the claim adds one, `max_attempts` bounds it,
 * a `continue` resets it — so it reads as progress while a try runs. What is shown is the
 * failures of the current step instead.
 */

export type ProgressFields = Pick<Job, 'status' | 'attempts' | 'step' | 'runAt' | 'startedAt'>;

/**
 * Started and not finished: running, or queued between steps (or for a retry). The same rule as
 * the active dedupe index (jobs_dedupe_active_uq); a running row always counts, started_at or not.
 */
export function isInProgress(job: Pick<Job, 'status' | 'startedAt'>): boolean {
  return job.status === 'running' || (job.status === 'queued' && job.startedAt !== null);
}

/**
 * Failures of the current step: the tries it started, less the one still running or the one that
 * ended it without failing (done, or cancelled by its hook — a started job's cancel runs on a
 * claim). A retried error, an expired or taken lease and an operator's fail each count; a lease
 * the owner released does not (the release gives the attempt back).
 */
export function stepFailures(job: ProgressFields): number {
  const lastTryOk = job.status === 'running' || job.status === 'done' || (job.status === 'cancelled' && job.startedAt !== null);
  return Math.max(job.attempts - (lastTryOk ? 1 : 0), 0);
}

export interface JobProgress {
  inProgress: boolean;
  /** The step the job is on while in progress; null otherwise. */
  currentStep: string | null;
  /** When the next step (or the retry) is due while the job waits between steps; null while running, parked or not in progress. */
  nextStepAt: Date | null;
  failures: number;
}

export function jobProgress(job: ProgressFields): JobProgress {
  const inProgress = isInProgress(job);
  const waiting = inProgress && job.status === 'queued' && job.runAt.getTime() < PARKED_MS;
  return { inProgress, currentStep: inProgress ? job.step : null, nextStepAt: waiting ? job.runAt : null, failures: stepFailures(job) };
}
