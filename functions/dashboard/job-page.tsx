import type { FC } from 'hono/jsx';
import { jobProgress, TERMINAL_STATUSES, type Job, type JobEvent } from '../../queue/index.ts';
import { eventJson, jobJson } from '../http/serialize.ts';
import { BuildLog } from './build-log.tsx';
import { FamilyPanel, ReplayLinks, ReplayPanel, WaitPanel, type JobWorkflow } from './job-workflow.tsx';
import { age, Json, shortId, StatusBadge, time } from './components.tsx';
import { Layout } from './layout.tsx';
import { Csrf, TopBar, type Lease } from './pages.tsx';

export interface JobPageData {
  now: Date;
  csrf: string;
  lease: Lease;
  job: Job;
  events: JobEvent[];
  scrub: (text: string) => string;
  /** The signal it waits for, its parent and children. */
  workflow: JobWorkflow;
  /** A build's archived log so far (scrubbed) and its last line's number, shown on its page. */
  buildLog?: { text: string; lastSeq: number };
  /** The action just done (`?done=`), to confirm it. */
  done?: string;
  error?: string;
}

/** What an action did, said from the job as it is now (a started job's cancel waits for its hook). */
export function noticeFor(done: string | undefined, job: Job): string | undefined {
  if (done === 'cancel') return job.status === 'cancelled' ? 'Cancelled.' : "Cancel requested: the job's cancel hook runs at its next step.";
  if (done === 'retry') return 'Requeued: it runs again from its checkpoint.';
  if (done === 'fail') return 'Failed by an operator.';
  if (done === 'signal-delivered') return 'Signal sent: its wait took it, and the job resumes now.';
  if (done === 'signal-kept') return 'Signal sent: it is not waiting for that event now, so the event is kept for its next wait on it.';
  if (done === 'replay') return 'A replay: a new job, linked to the job it replays below.';
  return undefined;
}

/** What an operator may do to the job in its status. */
const JobActions: FC<{ job: Job; csrf: string }> = ({ job, csrf }) => {
  const base = `/dashboard/jobs/${job.id}`;
  return (
    <div class="actions" id="job-actions">
      {job.status === 'queued' || job.status === 'running' ? (
        <>
          <form class="inline" method="post" action={`${base}/cancel`}>
            <Csrf token={csrf} />
            <button type="submit" class="danger" disabled={job.cancelRequestedAt !== null}>
              {job.cancelRequestedAt ? 'Cancel requested' : 'Cancel'}
            </button>
          </form>
          <form class="inline" method="post" action={`${base}/fail`}>
            <Csrf token={csrf} />
            <input name="reason" placeholder="reason (required)" required maxlength={1000} />
            <button type="submit" class="danger">Fail</button>
          </form>
        </>
      ) : null}
      {job.status === 'failed' || job.status === 'cancelled' || job.status === 'oom_killed' ? (
        <form class="inline" method="post" action={`${base}/retry`}>
          <Csrf token={csrf} />
          <button type="submit" class="primary">Retry</button>
        </form>
      ) : null}
      {job.type === 'build' ? <a href={`/dashboard/builds/${job.id}/log`} id="build-log">Build log</a> : null}
      {TERMINAL_STATUSES.includes(job.status) ? <a href="#replay" id="replay-link">Replay…</a> : null}
    </div>
  );
};

/** Where the job is. The try a running step is on is its failures so far plus one. */
function progressText(job: Job, now: Date): string {
  const p = jobProgress(job);
  if (!p.inProgress) return job.startedAt ? 'no: finished' : 'no: not started';
  if (job.status === 'running') return `yes: running step ${job.step}, attempt ${p.failures + 1} of ${job.maxAttempts}`;
  if (!p.nextStepAt) return `yes: parked at step ${job.step} until resumed`;
  const wait = p.nextStepAt.getTime() - now.getTime();
  return `yes: waiting, step ${job.step} due ${wait <= 0 ? 'now' : `in ${age(wait)}`} (${time(p.nextStepAt)})`;
}

/** Against the deadline: met, missed (ended after it, or still going past it, by how much), or time left. */
function deadlineState(job: Job, now: Date): string {
  const deadline = job.deadlineAt!.getTime();
  const end = job.finishedAt?.getTime();
  if (end !== undefined) return end <= deadline ? ' — met' : ` — missed by ${age(end - deadline)}`;
  return now.getTime() >= deadline ? ` — past it by ${age(now.getTime() - deadline)}` : ` — ${age(deadline - now.getTime())} left`;
}

const Progress: FC<{ job: Job; now: Date }> = ({ job, now }) => (
  <>
    <dt>in progress</dt><dd id="in-progress" data-in-progress={String(jobProgress(job).inProgress)}>{progressText(job, now)}</dd>
    <dt>failures</dt><dd id="failures">{jobProgress(job).failures} of {job.maxAttempts} (of the current step)</dd>
  </>
);

const JobFields: FC<{ job: Job; now: Date; scrub: (text: string) => string }> = ({ job, now, scrub }) => (
  <section class="panel">
    <h2>Job</h2>
    <dl class="fields">
      <dt>step</dt><dd>{job.step}</dd>
      <Progress job={job} now={now} />
      <dt>priority</dt><dd>{job.priority}</dd>
      <dt>run at</dt><dd>{time(job.runAt)}</dd>
      <dt>owner</dt><dd class="mono">{job.lockedBy ?? '–'}</dd>
      <dt>lease until</dt><dd>{time(job.lockedUntil)}</dd>
      <dt>created</dt><dd>{time(job.createdAt)}</dd>
      <dt>started</dt><dd>{time(job.startedAt)}</dd>
      <dt>finished</dt><dd>{time(job.finishedAt)}</dd>
      {job.deadlineAt ? <><dt>deadline</dt><dd id="deadline" data-severity={job.deadlineSeverity ?? ''}>{time(job.deadlineAt)} ({job.deadlineSeverity}){deadlineState(job, now)}</dd></> : null}
      {job.status === 'running' && job.claimedAt ? <><dt>running for</dt><dd>{age(now.getTime() - job.claimedAt.getTime())}</dd></> : null}
      <dt>pool / weight</dt><dd>{job.pool ?? 'any'} / {job.weight}</dd>
      <dt>dedupe key</dt><dd class="mono">{job.dedupeKey ?? '–'}</dd>
      <dt>submit key</dt><dd class="mono">{job.submitKey ?? '–'}</dd>
      {job.cancelRequestedAt ? <><dt>cancel requested</dt><dd>{time(job.cancelRequestedAt)} ({job.cancelReason})</dd></> : null}
      {job.supersededBy ? <><dt>superseded by</dt><dd><a href={`/dashboard/jobs/${job.supersededBy}`}>{job.supersededBy}</a></dd></> : null}
    </dl>
    <h2>Last error</h2>
    {job.lastError ? <pre class="json" id="last-error">{scrub(job.lastError)}</pre> : <p class="muted">none</p>}
  </section>
);

const Events: FC<{ events: JobEvent[]; scrub: (text: string) => string }> = ({ events, scrub }) => (
  <section class="panel">
    <h2>Events</h2>
    <ol class="timeline" id="events">
      {events.map((e) => {
        const shownEvent = eventJson(e, scrub); // secrets redacted and scrubbed, lease token withheld
        return (
          <li data-kind={e.kind}>
            <span class="mono">{time(e.at)}</span>
            <span class="kind">{e.kind}</span>
            {Object.keys(shownEvent.detail).length ? <span class="mono muted">{scrub(JSON.stringify(shownEvent.detail))}</span> : null}
          </li>
        );
      })}
    </ol>
  </section>
);

export const JobPage: FC<JobPageData> = ({ now, csrf, lease, job, events, workflow, scrub, buildLog, done, error }) => {
  const notice = noticeFor(done, job);
  const shown = jobJson(job, scrub); // the API's view: secrets redacted, what the system produced scrubbed
  const terminal = TERMINAL_STATUSES.includes(job.status);
  // A running build's log is live over its socket; its script reloads the page when that fails.
  const liveLog = buildLog !== undefined && !terminal;
  // A job waiting for an event is parked until one comes (or its timeout): no reload, which would empty a half-typed signal.
  return (
    <Layout title={`${job.type} …${shortId(job.id)}`} refreshSeconds={terminal || liveLog || workflow.wait ? undefined : 10} header={<TopBar csrf={csrf} lease={lease} now={now} />}>
      {notice ? <div class="notice" role="status">{notice}</div> : null}
      {error ? <div class="error" role="alert">{error}</div> : null}
      <h1>
        {job.type} <span class="mono">{job.id}</span> <StatusBadge status={job.status} />
      </h1>
      <JobActions job={job} csrf={csrf} />
      <ReplayLinks events={events} />

      <div class="grid2">
        <JobFields job={job} now={now} scrub={scrub} />
        <section class="panel">
          <h2>Payload</h2>
          <Json value={shown.payload} scrub={scrub} />
          <h2>Checkpoint</h2>
          <Json value={Object.keys(job.checkpoint).length ? shown.checkpoint : null} scrub={scrub} />
          <h2>Result</h2>
          <Json value={shown.result} scrub={scrub} />
        </section>
      </div>

      {terminal ? null : <WaitPanel job={job} wait={workflow.wait} csrf={csrf} scrub={scrub} />}
      <FamilyPanel family={workflow.family} scrub={scrub} />
      <ReplayPanel job={job} events={events} csrf={csrf} />

      {buildLog !== undefined ? <BuildLog jobId={job.id} text={buildLog.text} lastSeq={buildLog.lastSeq} inProgress={!terminal} /> : null}

      <Events events={events} scrub={scrub} />
    </Layout>
  );
};
