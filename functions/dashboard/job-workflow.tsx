import type { FC } from 'hono/jsx';
import { TERMINAL_STATUSES, type ChildOutcome, type Job, type JobEvent } from '../../queue/index.ts';
import { redactSecrets } from '../lib/redact.ts';
import { JobLink, StatusBadge, time } from './components.tsx';
import { Csrf } from './pages.tsx';
import type { JobFamily, JobWait } from './queries.ts';

/**
 * A job's place in a workflow, on its page: the signal it waits for (and a form to send one),
 * its parent and children with their join, and replay (the form, and the links between a replay
 * and the job it replays). Each form posts to an action in job-workflow-routes.tsx.
 */

/** Children listed on the page; the join's counts cover them all. */
export const CHILDREN_SHOWN = 50;

export interface JobWorkflow {
  wait: JobWait | null;
  family: JobFamily;
}

type Scrub = (text: string) => string;

/** The steps the job reached, as worker.replay_job reads them: 'start', each checkpoint's step, the step it ended at. */
export function replaySteps(job: Job, events: JobEvent[]): string[] {
  const steps = new Set(['start', job.step]);
  for (const e of events) if (e.kind === 'checkpoint' && typeof e.detail.step === 'string') steps.add(e.detail.step);
  return [...steps].sort();
}

export const WaitPanel: FC<{ job: Job; wait: JobWait | null; csrf: string; scrub: Scrub }> = ({ job, wait, csrf, scrub }) => (
  <section class="panel" id="wait">
    <h2>{wait ? 'Waiting for an event' : 'Signal'}</h2>
    {wait ? (
      <dl class="fields" id="wait-fields" data-wait-name={scrub(wait.name)}>
        <dt>event</dt><dd class="mono">{scrub(wait.name)}</dd>
        <dt>key</dt><dd class="mono">{wait.key === null ? '–' : scrub(wait.key)}</dd>
        <dt>resumes at step</dt><dd>{wait.step}</dd>
        <dt>since</dt><dd>{time(wait.since)}</dd>
        <dt>times out</dt><dd id="wait-timeout">{wait.timeoutAt ? time(wait.timeoutAt) : 'never'}</dd>
      </dl>
    ) : (
      <p class="muted">Not waiting for an event now: one sent to it is kept, and its next wait on that name (and key) takes it.</p>
    )}
    <form method="post" action={`/dashboard/jobs/${job.id}/signal`} id="signal-form">
      <Csrf token={csrf} />
      <p class="actions">
        <input name="name" value={wait ? scrub(wait.name) : ''} placeholder="event name" required maxlength={200} aria-label="event name" />
        <input name="key" value={wait?.key ? scrub(wait.key) : ''} placeholder="key (optional)" maxlength={500} aria-label="key" />
      </p>
      <textarea name="payload" rows={3} cols={60} placeholder="payload: any JSON (optional)" aria-label="payload"></textarea>
      <p class="actions"><button type="submit" class="primary">Send signal</button></p>
    </form>
  </section>
);

function joinText(w: NonNullable<JobFamily['children']>): string {
  const which = w.join === 'all' ? 'all' : w.join === 'first' ? 'the first' : `${w.need}`;
  return `Waits for ${which} of ${w.total} children (${w.ended} ended${w.joinedAt ? `; joined ${time(w.joinedAt)}` : ''}), then resumes at step ${w.nextStep}.`;
}

/** A child's outcome in a line: its result or its last error, secrets redacted and scrubbed. */
function outcomeText(c: ChildOutcome, scrub: Scrub): string {
  if (c.lastError && c.status !== 'done') return scrub(c.lastError).split('\n')[0]!.slice(0, 200);
  return c.result === null ? '' : scrub(JSON.stringify(redactSecrets(c.result))).slice(0, 200);
}

export const FamilyPanel: FC<{ family: JobFamily; scrub: Scrub }> = ({ family, scrub }) => {
  const w = family.children;
  if (!family.parentId && !w) return null;
  return (
    <section class="panel" id="family">
      <h2>Parent and children</h2>
      {family.parentId ? <p id="parent">Child of <JobLink id={family.parentId} />.</p> : null}
      {w ? (
        <>
          <p id="join" data-join={w.join} data-need={String(w.need)} data-ended={String(w.ended)} data-total={String(w.total)}>{joinText(w)}</p>
          <table id="children">
            <thead><tr><th>child</th><th>type</th><th>status</th><th>outcome</th><th>finished</th></tr></thead>
            <tbody>
              {w.children.map((c) => (
                <tr data-child={c.id} class={`row-${c.status}`}>
                  <td class="mono"><JobLink id={c.id} /></td>
                  <td>{c.type ?? '–'}</td>
                  <td>{c.status === 'pruned' ? <span class="muted">pruned</span> : <StatusBadge status={c.status} />}</td>
                  <td class="mono">{outcomeText(c, scrub)}</td>
                  <td>{time(c.finishedAt)}</td>
                </tr>
              ))}
            </tbody>
          </table>
          {w.total > w.children.length ? <p class="muted">The first {w.children.length} of {w.total}.</p> : null}
        </>
      ) : null}
    </section>
  );
};

/** The links a replay leaves in both jobs' history. */
export const ReplayLinks: FC<{ events: JobEvent[] }> = ({ events }) => {
  const links = events.filter((e) => (e.kind === 'replay_of' || e.kind === 'replayed_by') && typeof e.detail.job === 'string');
  if (links.length === 0) return null;
  return (
    <ul id="replays">
      {links.map((e) => (
        <li data-kind={e.kind}>
          {e.kind === 'replay_of' ? 'A replay of ' : 'Replayed as '}
          <JobLink id={e.detail.job as string} /> from step {String(e.detail.fromStep)}
          {e.detail.payloadEdited === true ? ', payload edited' : ''} ({time(e.at)})
        </li>
      ))}
    </ul>
  );
};

/**
 * Replay an ended job as a new one. The payload box starts empty (the job's own payload): filling
 * it with the payload would put its secret-named fields on the page, which shows them redacted.
 */
export const ReplayPanel: FC<{ job: Job; events: JobEvent[]; csrf: string }> = ({ job, events, csrf }) => {
  if (!TERMINAL_STATUSES.includes(job.status)) return null;
  return (
    <section class="panel" id="replay">
      <h2>Replay</h2>
      <p class="muted">Runs the job again as a new job (this one stays as it is), from a step it reached with its last checkpoint.</p>
      <form method="post" action={`/dashboard/jobs/${job.id}/replay`} id="replay-form">
        <Csrf token={csrf} />
        <p class="actions">
          <label>from step <select name="fromStep">{replaySteps(job, events).map((s) => <option value={s} selected={s === 'start'}>{s}</option>)}</select></label>
        </p>
        <textarea name="payload" rows={4} cols={60} placeholder="edited payload: a JSON object (empty: the job's own payload)" aria-label="payload"></textarea>
        <p class="actions"><button type="submit" class="primary">Replay</button></p>
      </form>
    </section>
  );
};
