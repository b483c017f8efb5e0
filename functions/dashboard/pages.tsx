import type { FC } from 'hono/jsx';
import { JOB_STATUSES, TERMINAL_STATUSES, type Job, type JobEvent, type JobStatus, type RunningJob } from '../../queue/index.ts';
import { eventJson, jobJson } from '../http/serialize.ts';
import { alertTitle } from '../lib/alert-kinds.ts';
import { age, DepthChart, JobLink, Json, shortId, StatusBadge, STATUS_COLOURS, time, Time } from './components.tsx';
import { Layout } from './layout.tsx';
import type { DepthPoint, OpenAlert } from './queries.ts';

export interface Lease {
  holder: string | null;
  generation: number;
  acquiredAt: Date | null;
  expiresAt: Date | null;
}

const Csrf: FC<{ token: string }> = ({ token }) => <input type="hidden" name="_csrf" value={token} />;

const TopBar: FC<{ csrf: string; lease: Lease; now: Date }> = ({ csrf, lease, now }) => (
  <header class="top">
    <a href="/">starbase-worker</a>
    <span class="lease">
      leader {lease.holder ?? 'none'} · generation {lease.generation}
      {lease.expiresAt && lease.expiresAt.getTime() < now.getTime() ? ' · expired' : ''}
    </span>
    <form method="post" action="/dashboard/logout">
      <Csrf token={csrf} />
      <button type="submit">Log out</button>
    </form>
    <form method="post" action="/dashboard/logout-everywhere">
      <Csrf token={csrf} />
      <button type="submit" title="End every dashboard session, on every browser">Log out everywhere</button>
    </form>
  </header>
);

export const LoginPage: FC<{ next: string; error?: string; notice?: string }> = ({ next, error, notice }) => (
  <Layout title="Log in">
    <form class="login" method="post" action="/dashboard/login">
      <h1>starbase-worker</h1>
      <p class="muted">The operator dashboard. Log in with the admin token (ADMIN_TOKEN; `npm start` prints its dev token).</p>
      {notice ? <div class="notice" role="status">{notice}</div> : null}
      {error ? <div class="error" role="alert">{error}</div> : null}
      <label for="token">Admin token</label>
      <input id="token" name="token" type="password" autocomplete="current-password" required autofocus />
      <input type="hidden" name="next" value={next} />
      <button class="primary" type="submit">Log in</button>
    </form>
  </Layout>
);

export interface OverviewData {
  now: Date;
  csrf: string;
  counts: Record<JobStatus, number> & { due: number };
  depth: DepthPoint[];
  depthWindowMs: number;
  running: RunningJob[];
  stuckMs: number;
  recent: Job[];
  filter: { status?: JobStatus; type?: string };
  types: string[];
  lease: Lease;
  alerts: OpenAlert[];
  scrub: (text: string) => string;
  notice?: string;
}

export const OverviewPage: FC<OverviewData> = (d) => (
  <Layout title="Overview" refreshSeconds={10} header={<TopBar csrf={d.csrf} lease={d.lease} now={d.now} />}>
    {d.notice ? <div class="notice">{d.notice}</div> : null}
    <div class="cards" id="counters">
      {JOB_STATUSES.map((s) => (
        <a class="card" href={`/?status=${s}`} style={`--c:${STATUS_COLOURS[s]}`} data-counter={s}>
          <div class="label">{s}</div>
          <div class="n">{d.counts[s]}</div>
        </a>
      ))}
      <div class="card" data-counter="due">
        <div class="label">due now</div>
        <div class="n">{d.counts.due}</div>
      </div>
    </div>

    <section class="panel" id="depth">
      <h2>Queue depth, last {Math.round(d.depthWindowMs / 3_600_000)} h</h2>
      <DepthChart points={d.depth} windowMs={d.depthWindowMs} now={d.now} />
    </section>

    <div class="grid2">
      <section class="panel" id="running">
        <h2>Running ({d.running.length})</h2>
        {d.running.length === 0 ? (
          <p class="muted">Nothing is running.</p>
        ) : (
          <table>
            <thead><tr><th>job</th><th>type</th><th>step</th><th>owner</th><th>running for</th></tr></thead>
            <tbody>
              {d.running.map((r) => (
                <tr class={r.runningForMs > d.stuckMs ? 'row-failed' : 'row-running'}>
                  <td class="mono"><JobLink id={r.id} /></td>
                  <td>{r.type}</td>
                  <td>{r.step}</td>
                  <td class="mono">{r.owner ?? '–'}</td>
                  <td>{age(r.runningForMs)}{r.runningForMs > d.stuckMs ? ' (stuck)' : ''}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </section>

      <section class="panel" id="leader">
        <h2>Leader lease</h2>
        <dl class="fields">
          <dt>holder</dt><dd class="mono">{d.lease.holder ?? 'none'}</dd>
          <dt>generation</dt><dd>{d.lease.generation}</dd>
          <dt>acquired</dt><dd><Time at={d.lease.acquiredAt} now={d.now} /></dd>
          <dt>expires</dt><dd><Time at={d.lease.expiresAt} now={d.now} /></dd>
        </dl>
        <h2>Open alerts ({d.alerts.length})</h2>
        {d.alerts.length === 0 ? (
          <p class="muted">No open alerts.</p>
        ) : (
          <table id="alerts">
            <thead><tr><th>kind</th><th>message</th><th>opened</th><th /></tr></thead>
            <tbody>
              {d.alerts.map((a) => (
                <tr data-alert={a.kind}>
                  <td title={alertTitle(a.kind)}>{a.kind}{a.occurrences > 1 ? ` ×${a.occurrences}` : ''}</td>
                  <td>
                    {a.jobId ? <a href={`/dashboard/jobs/${a.jobId}`}>{d.scrub(a.message)}</a> : d.scrub(a.message)}
                    {a.notifiedAt ? null : <span class="muted"> (not yet sent)</span>}
                  </td>
                  <td><Time at={a.openedAt} now={d.now} /></td>
                  <td>
                    <form class="inline" method="post" action={`/dashboard/alerts/${a.id}/resolve`}>
                      <Csrf token={d.csrf} />
                      <button type="submit">Resolve</button>
                    </form>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </section>
    </div>

    <section class="panel" id="recent">
      <h2>Recent jobs</h2>
      <form method="get" action="/" class="actions">
        <label>status{' '}
          <select name="status">
            <option value="">any</option>
            {JOB_STATUSES.map((s) => <option value={s} selected={d.filter.status === s}>{s}</option>)}
          </select>
        </label>
        <label>type{' '}
          <select name="type">
            <option value="">any</option>
            {d.types.map((t) => <option value={t} selected={d.filter.type === t}>{t}</option>)}
          </select>
        </label>
        <button type="submit">Filter</button>
        {d.filter.status || d.filter.type ? <a href="/">clear</a> : null}
      </form>
      <table>
        <thead><tr><th>job</th><th>type</th><th>status</th><th>step</th><th>attempts</th><th>created</th><th>finished</th></tr></thead>
        <tbody>
          {d.recent.length === 0 ? <tr><td colspan={7} class="muted">No jobs{d.filter.status || d.filter.type ? ' match the filter' : ''}.</td></tr> : null}
          {d.recent.map((j) => (
            <tr class={`row-${j.status}`} data-job={j.id}>
              <td class="mono"><JobLink id={j.id} /></td>
              <td>{j.type}</td>
              <td><StatusBadge status={j.status} /></td>
              <td>{j.step}</td>
              <td>{j.attempts}/{j.maxAttempts}</td>
              <td><Time at={j.createdAt} now={d.now} /></td>
              <td><Time at={j.finishedAt} now={d.now} /></td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  </Layout>
);

export interface JobPageData {
  now: Date;
  csrf: string;
  lease: Lease;
  job: Job;
  events: JobEvent[];
  scrub: (text: string) => string;
  /** The action just done (`?done=`), to confirm it. */
  done?: string;
  error?: string;
}

/** What an action did, said from the job as it is now (a started job's cancel waits for its hook). */
export function noticeFor(done: string | undefined, job: Job): string | undefined {
  if (done === 'cancel') return job.status === 'cancelled' ? 'Cancelled.' : "Cancel requested: the job's cancel hook runs at its next step.";
  if (done === 'retry') return 'Requeued: it runs again from its checkpoint.';
  if (done === 'fail') return 'Failed by an operator.';
  return undefined;
}

export const JobPage: FC<JobPageData> = ({ now, csrf, lease, job, events, scrub, done, error }) => {
  const notice = noticeFor(done, job);
  const shown = jobJson(job); // payload, checkpoint and result with secrets redacted
  const terminal = TERMINAL_STATUSES.includes(job.status);
  const base = `/dashboard/jobs/${job.id}`;
  return (
    <Layout title={`${job.type} …${shortId(job.id)}`} refreshSeconds={terminal ? undefined : 10} header={<TopBar csrf={csrf} lease={lease} now={now} />}>
      {notice ? <div class="notice" role="status">{notice}</div> : null}
      {error ? <div class="error" role="alert">{error}</div> : null}
      <h1>
        {job.type} <span class="mono">{job.id}</span> <StatusBadge status={job.status} />
      </h1>
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
      </div>

      <div class="grid2">
        <section class="panel">
          <h2>Job</h2>
          <dl class="fields">
            <dt>step</dt><dd>{job.step}</dd>
            <dt>attempts</dt><dd>{job.attempts} of {job.maxAttempts}</dd>
            <dt>priority</dt><dd>{job.priority}</dd>
            <dt>run at</dt><dd>{time(job.runAt)}</dd>
            <dt>owner</dt><dd class="mono">{job.lockedBy ?? '–'}</dd>
            <dt>lease until</dt><dd>{time(job.lockedUntil)}</dd>
            <dt>created</dt><dd>{time(job.createdAt)}</dd>
            <dt>started</dt><dd>{time(job.startedAt)}</dd>
            <dt>finished</dt><dd>{time(job.finishedAt)}</dd>
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
        <section class="panel">
          <h2>Payload</h2>
          <Json value={shown.payload} scrub={scrub} />
          <h2>Checkpoint</h2>
          <Json value={Object.keys(job.checkpoint).length ? shown.checkpoint : null} scrub={scrub} />
          <h2>Result</h2>
          <Json value={shown.result} scrub={scrub} />
        </section>
      </div>

      <section class="panel">
        <h2>Events</h2>
        <ol class="timeline" id="events">
          {events.map((e) => {
            const shownEvent = eventJson(e); // secrets redacted, lease token withheld
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
    </Layout>
  );
};

export const ErrorPage: FC<{ status: number; message: string }> = ({ status, message }) => (
  <Layout title={`Error ${status}`}>
    <h1>{status === 404 ? 'Not found' : `Error ${status}`}</h1>
    <div class="error" role="alert">{message}</div>
    <p><a href="/">Back to the overview</a></p>
  </Layout>
);
