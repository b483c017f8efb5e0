import type { FC } from 'hono/jsx';
import { JobLink, Time } from './components.tsx';
import { Layout } from './layout.tsx';
import { Csrf, TopBar, type Lease } from './pages.tsx';
import type { DeadLetterGroup } from './queries.ts';

export interface DeadLettersPageData {
  now: Date;
  csrf: string;
  lease: Lease;
  groups: DeadLetterGroup[];
  type?: string;
  types: string[];
  scrub: (text: string) => string;
}

/**
 * One button of a group: a dry run of the bulk operation on the group's type and fingerprint
 * (the bulk page's preview, which shows the count and a sample before anything changes).
 */
const DryRun: FC<{ g: DeadLetterGroup; op: 'retry' | 'cancel'; csrf: string; label: string; title: string }> = ({ g, op, csrf, label, title }) => (
  <form class="inline" method="post" action="/dashboard/bulk/preview">
    <Csrf token={csrf} />
    <input type="hidden" name="op" value={op} />
    <input type="hidden" name="type" value={g.type} />
    <input type="hidden" name="fingerprint" value={g.fingerprint} />
    <button type="submit" class={op === 'cancel' ? 'danger' : undefined} title={title}>{label}</button>
  </form>
);

const GroupRow: FC<{ g: DeadLetterGroup; now: Date; csrf: string; scrub: (text: string) => string }> = ({ g, now, csrf, scrub }) => (
  <tr data-group={`${g.type}:${g.fingerprint}`}>
    <td>{g.type}</td>
    <td class="mono">{g.fingerprint}</td>
    <td data-jobs={String(g.jobs)}>{g.jobs}{g.oomKilled ? <span class="muted"> ({g.failed} failed, {g.oomKilled} oom_killed)</span> : null}</td>
    <td class="mono" data-error="">{scrub(g.error).slice(0, 300)}</td>
    <td class="mono"><JobLink id={g.sampleId} />{g.sampleError ? <div class="muted" data-sample-error="">{scrub(g.sampleError).split('\n', 1)[0]!.slice(0, 300)}</div> : null}</td>
    <td><Time at={g.firstSeen} now={now} /></td>
    <td><Time at={g.lastSeen} now={now} /></td>
    <td>
      <DryRun g={g} op="retry" csrf={csrf} label="Retry these…" title="A dry run of retrying the group's jobs: the count and a sample first" />
      <DryRun g={g} op="cancel" csrf={csrf} label="Cancel…" title="Cancel the jobs of this type still retrying with this error (queued or running): a dry run first" />
    </td>
  </tr>
);

/** The failed and oom_killed jobs grouped by type and error fingerprint, the group seen last first. */
export const DeadLettersPage: FC<DeadLettersPageData> = (d) => (
  <Layout title="Dead letters" header={<TopBar csrf={d.csrf} lease={d.lease} now={d.now} />}>
    <section class="panel" id="dead-letters">
      <h2>Dead letters ({d.groups.length} {d.groups.length === 1 ? 'group' : 'groups'})</h2>
      <p class="muted">Failed and oom_killed jobs, grouped by type and how they failed: the last error with ids, numbers, hex, quoted values and times taken out, hashed (the fingerprint).</p>
      <form method="get" action="/dashboard/dead-letters" class="actions">
        <label>type <select name="type"><option value="">any</option>{d.types.map((t) => <option value={t} selected={d.type === t}>{t}</option>)}</select></label>
        <button type="submit">Show</button>
      </form>
      <table>
        <thead><tr><th>type</th><th>fingerprint</th><th>jobs</th><th>error</th><th>latest</th><th>first seen</th><th>last seen</th><th></th></tr></thead>
        <tbody>
          {d.groups.length === 0 ? <tr><td colspan={8} class="muted">No dead letters.</td></tr> : null}
          {d.groups.map((g) => <GroupRow g={g} now={d.now} csrf={d.csrf} scrub={d.scrub} />)}
        </tbody>
      </table>
    </section>
  </Layout>
);
