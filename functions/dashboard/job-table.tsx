import type { FC } from 'hono/jsx';
import { isInProgress, JOB_STATUSES, stepFailures, type Job, type JobStatus } from '../../queue/index.ts';
import { JobLink, StatusBadge, Time } from './components.tsx';

/** A job list's table (the overview's recent jobs, the jobs page) and its filter form. */

/** Characters of the last error a list shows (the job's page shows it whole). */
export const ERROR_SHOWN = 120;

/** The last error for a list cell: scrubbed first (a cut must not split a secret past the scrubber), then cut. */
export const LastError: FC<{ error: string | null; scrub: (text: string) => string }> = ({ error, scrub }) => {
  if (!error) return <span class="muted">–</span>;
  const clean = scrub(error);
  const firstLine = clean.split('\n', 1)[0]!;
  const cut = firstLine.length > ERROR_SHOWN ? `${firstLine.slice(0, ERROR_SHOWN)}…` : firstLine;
  return <span class="last-error" title={clean.slice(0, 2000)} data-last-error="">{cut}</span>;
};

export const JobTable: FC<{ jobs: Job[]; now: Date; scrub: (text: string) => string; empty: string }> = ({ jobs, now, scrub, empty }) => (
  <table>
    <thead><tr><th>job</th><th>type</th><th>status</th><th>step</th><th title="failures of the current step / tries a step gets">failures</th><th>last error</th><th>created</th><th>finished</th></tr></thead>
    <tbody>
      {jobs.length === 0 ? <tr><td colspan={8} class="muted">{empty}</td></tr> : null}
      {jobs.map((j) => (
        <tr class={`row-${j.status}`} data-job={j.id}>
          <td class="mono"><JobLink id={j.id} /></td>
          <td>{j.type}</td>
          <td><StatusBadge status={j.status} />{j.status === 'queued' && isInProgress(j) ? <span class="muted" data-between-steps=""> in progress</span> : null}</td>
          <td>{j.step}</td>
          <td>{stepFailures(j)}/{j.maxAttempts}</td>
          <td class="mono"><LastError error={j.lastError} scrub={scrub} /></td>
          <td><Time at={j.createdAt} now={now} /></td>
          <td><Time at={j.finishedAt} now={now} /></td>
        </tr>
      ))}
    </tbody>
  </table>
);

export interface ListFilter { status?: JobStatus; type?: string; inProgress?: boolean }

/** Status, type and in-progress selects; `children` go before the button (the jobs page's search box). */
export const FilterFields: FC<{ filter: ListFilter; types: string[]; children?: unknown }> = ({ filter, types, children }) => (
  <>
    {children}
    <label>status{' '}
      <select name="status">
        <option value="">any</option>
        {JOB_STATUSES.map((s) => <option value={s} selected={filter.status === s}>{s}</option>)}
      </select>
    </label>
    <label>type{' '}
      <select name="type">
        <option value="">any</option>
        {types.map((t) => <option value={t} selected={filter.type === t}>{t}</option>)}
      </select>
    </label>
    <label><input type="checkbox" name="inProgress" value="true" checked={filter.inProgress === true} /> in progress</label>
  </>
);
