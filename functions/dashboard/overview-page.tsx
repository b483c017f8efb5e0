import type { FC } from 'hono/jsx';
import { JOB_STATUSES, type InProgressJob, type Job, type JobStatus } from '../../queue/index.ts';
import { alertTitle } from '../lib/alert-kinds.ts';
import { age, DepthChart, JobLink, StatusBadge, STATUS_COLOURS, Time } from './components.tsx';
import { FilterFields, JobTable, LastError } from './job-table.tsx';
import { Layout } from './layout.tsx';
import { Csrf, TopBar, type Lease } from './pages.tsx';
import { searchHref } from './search.ts';
import type { DepthPoint, OpenAlert, PastDeadline, StatusCounts } from './queries.ts';

export interface OverviewData {
  now: Date;
  csrf: string;
  counts: StatusCounts;
  depth: DepthPoint[];
  depthWindowMs: number;
  /** Running jobs, then those queued between steps (at most IN_PROGRESS_SHOWN). */
  inProgress: InProgressJob[];
  stuckMs: number;
  recent: Job[];
  /** The cursor of the page after `recent` (the jobs page), when there are more. */
  nextCursor: string | null;
  filter: { status?: JobStatus; type?: string; inProgress?: boolean };
  types: string[];
  lease: Lease;
  alerts: OpenAlert[];
  pastDeadline: PastDeadline;
  scrub: (text: string) => string;
  notice?: string;
}

const Counters: FC<{ d: OverviewData }> = ({ d }) => (
  <div class="cards" id="counters">
    {JOB_STATUSES.map((s) => (
      <a class="card" href={`/?status=${s}`} style={`--c:${STATUS_COLOURS[s]}`} data-counter={s}>
        <div class="label">{s}</div>
        <div class="n">{d.counts[s]}</div>
      </a>
    ))}
    <a class="card" href="/?inProgress=true" style={`--c:${STATUS_COLOURS.running}`} data-counter="in_progress" title="started and not finished: running, or queued between steps">
      <div class="label">in progress</div>
      <div class="n">{d.counts.inProgress}</div>
    </a>
    <div class="card" data-counter="due">
      <div class="label">due now</div>
      <div class="n">{d.counts.due}</div>
    </div>
  </div>
);

/** What an in-progress job is doing now: its step running for so long, or waiting for its next step. */
const Doing: FC<{ j: InProgressJob; d: OverviewData }> = ({ j, d }) => {
  if (j.runningForMs !== null) return <>running for {age(j.runningForMs)}{j.runningForMs > d.stuckMs ? ' (stuck)' : ''}</>;
  if (j.nextStepAt === null) return <>parked (until resumed)</>;
  return <>next step <Time at={j.nextStepAt} now={d.now} /></>;
};

const InProgress: FC<{ d: OverviewData }> = ({ d }) => (
  <section class="panel" id="in-progress">
    <h2>In progress ({d.counts.inProgress}: {d.counts.running} running, {d.counts.waiting} between steps)</h2>
    {d.inProgress.length === 0 ? (
      <p class="muted">Nothing is in progress.</p>
    ) : (
      <table>
        <thead><tr><th>job</th><th>type</th><th>step</th><th>owner</th><th>now</th><th>failures</th><th>last error</th></tr></thead>
        <tbody>
          {d.inProgress.map((j) => (
            <tr class={j.runningForMs !== null && j.runningForMs > d.stuckMs ? 'row-failed' : `row-${j.status}`} data-in-progress={j.id}>
              <td class="mono"><JobLink id={j.id} /></td>
              <td>{j.type}</td>
              <td>{j.step}</td>
              <td class="mono">{j.owner ?? '–'}</td>
              <td><Doing j={j} d={d} /></td>
              <td>{j.failures}</td>
              <td class="mono"><LastError error={j.lastError} scrub={d.scrub} /></td>
            </tr>
          ))}
        </tbody>
      </table>
    )}
    {d.inProgress.length < d.counts.inProgress ? <p class="muted">The first {d.inProgress.length} shown; <a href="/?inProgress=true">all in recent jobs</a>.</p> : null}
  </section>
);

/** Jobs past their deadline and not ended, the longest overdue first: each with its deadline, how late, and how loud. */
const PastDeadlineJobs: FC<{ d: OverviewData }> = ({ d }) =>
  d.pastDeadline.total === 0 ? null : (
    <section class="panel" id="past-deadline">
      <h2>Past their deadline ({d.pastDeadline.total})</h2>
      <table>
        <thead><tr><th>job</th><th>type</th><th>status</th><th>deadline</th><th>late by</th><th>severity</th></tr></thead>
        <tbody>
          {d.pastDeadline.jobs.map((j) => (
            <tr class={j.deadlineSeverity === 'critical' ? 'row-failed' : `row-${j.status}`} data-past-deadline={j.id}>
              <td class="mono"><JobLink id={j.id} /></td>
              <td>{j.type}</td>
              <td><StatusBadge status={j.status} /></td>
              <td><Time at={j.deadlineAt} now={d.now} /></td>
              <td data-late-by="">{j.deadlineAt ? age(d.now.getTime() - j.deadlineAt.getTime()) : '–'}</td>
              <td data-severity={j.deadlineSeverity ?? ''}>{j.deadlineSeverity}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {d.pastDeadline.jobs.length < d.pastDeadline.total ? <p class="muted">The {d.pastDeadline.jobs.length} longest overdue shown.</p> : null}
    </section>
  );

const LeaderAndAlerts: FC<{ d: OverviewData }> = ({ d }) => (
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
        <thead><tr><th>kind</th><th>severity</th><th>message</th><th>opened</th><th /></tr></thead>
        <tbody>
          {d.alerts.map((a) => (
            <tr data-alert={a.kind} class={a.severity === 'critical' ? 'row-failed' : undefined}>
              <td title={alertTitle(a.kind)}>{a.kind}{a.occurrences > 1 ? ` ×${a.occurrences}` : ''}</td>
              <td data-severity={a.severity}>{a.severity}</td>
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
);

const RecentJobs: FC<{ d: OverviewData }> = ({ d }) => {
  const filtered = Boolean(d.filter.status || d.filter.type || d.filter.inProgress);
  return (
    <section class="panel" id="recent">
      <h2>Recent jobs</h2>
      <form method="get" action="/" class="actions">
        <FilterFields filter={d.filter} types={d.types} />
        <button type="submit">Filter</button>
        {filtered ? <a href="/">clear</a> : null}
        <a href="/dashboard/jobs">search</a>
      </form>
      <JobTable jobs={d.recent} now={d.now} scrub={d.scrub} empty={`No jobs${filtered ? ' match the filter' : ''}.`} />
      {d.nextCursor ? <p class="actions"><a href={searchHref({ q: '', ...d.filter }, d.nextCursor)} id="older" rel="next">older »</a></p> : null}
    </section>
  );
};

export const OverviewPage: FC<OverviewData> = (d) => (
  <Layout title="Overview" refreshSeconds={10} header={<TopBar csrf={d.csrf} lease={d.lease} now={d.now} />}>
    {d.notice ? <div class="notice">{d.notice}</div> : null}
    <Counters d={d} />

    <section class="panel" id="depth">
      <h2>Queue depth, last {Math.round(d.depthWindowMs / 3_600_000)} h</h2>
      <DepthChart points={d.depth} windowMs={d.depthWindowMs} now={d.now} />
    </section>

    <PastDeadlineJobs d={d} />

    <div class="grid2">
      <InProgress d={d} />
      <LeaderAndAlerts d={d} />
    </div>

    <RecentJobs d={d} />
  </Layout>
);
