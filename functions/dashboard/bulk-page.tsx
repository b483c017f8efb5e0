import type { FC } from 'hono/jsx';
import { JOB_STATUSES, type BulkCancelResult, type BulkRequeueResult, type Job } from '../../queue/index.ts';
import { bulkFields, TIME_FIELDS, type BulkRequest } from './bulk-form.ts';
import { JobTable } from './job-table.tsx';
import { Layout } from './layout.tsx';
import { Csrf, TopBar, type Lease } from './pages.tsx';

export interface BulkPreview {
  request: BulkRequest;
  matched: number;
  sample: Job[];
  seal: string;
}

export interface BulkOutcome {
  request: BulkRequest;
  counts: BulkRequeueResult | BulkCancelResult;
  seal: string;
}

export interface BulkPageData {
  now: Date;
  csrf: string;
  lease: Lease;
  types: string[];
  /** The filter form's values. */
  shown: Record<string, string>;
  error?: string;
  preview?: BulkPreview;
  outcome?: BulkOutcome;
  scrub: (text: string) => string;
}

const TIME_LABELS: Record<(typeof TIME_FIELDS)[number], string> = {
  createdAfter: 'created at or after', createdBefore: 'created before', finishedAfter: 'finished at or after', finishedBefore: 'finished before',
};

/** A datetime-local input shows a value without a zone: the dashboard's times are UTC. */
const localTime = (iso: string | undefined) => iso?.replace(/(\.\d+)?Z$/, '') ?? '';

const FilterForm: FC<{ csrf: string; shown: Record<string, string>; types: string[] }> = ({ csrf, shown, types }) => (
  <form method="post" action="/dashboard/bulk/preview" id="bulk-form">
    <Csrf token={csrf} />
    <p class="actions">
      <label>operation <select name="op">
        <option value="retry" selected={shown.op !== 'cancel'}>retry (failed, cancelled, oom_killed)</option>
        <option value="cancel" selected={shown.op === 'cancel'}>cancel (queued, running)</option>
      </select></label>
      <label>type <select name="type"><option value="">any</option>{types.map((t) => <option value={t} selected={shown.type === t}>{t}</option>)}</select></label>
      <label>status <select name="status"><option value="">any the operation takes</option>{JOB_STATUSES.map((s) => <option value={s} selected={shown.status === s}>{s}</option>)}</select></label>
      <label>error fingerprint <input name="fingerprint" value={shown.fingerprint ?? ''} size={18} maxlength={16} placeholder="16 hex digits" /></label>
    </p>
    <p class="actions">
      {TIME_FIELDS.map((f) => <label>{TIME_LABELS[f]} <input type="datetime-local" step="1" name={f} value={localTime(shown[f])} /></label>)}
      <span class="muted">(UTC)</span>
    </p>
    <p class="actions">
      <label>cancel reason <input name="reason" size={40} maxlength={1000} placeholder="cancelled in bulk from the dashboard" /></label>
      <button type="submit">Dry run</button>
    </p>
  </form>
);

/** The request the dry run counted, as hidden fields with its seal: a confirm posts exactly these. */
const Carried: FC<{ request: BulkRequest; seal: string; csrf: string }> = ({ request, seal, csrf }) => (
  <>
    <Csrf token={csrf} />
    {Object.entries(bulkFields(request)).map(([name, value]) => <input type="hidden" name={name} value={value} />)}
    <input type="hidden" name="_seal" value={seal} />
  </>
);

const verb = (op: BulkRequest['op']) => (op === 'retry' ? 'requeued' : 'cancelled');

const Preview: FC<{ p: BulkPreview; csrf: string; now: Date; scrub: (text: string) => string }> = ({ p, csrf, now, scrub }) => (
  <section class="panel" id="bulk-preview" data-matched={String(p.matched)}>
    <h2>Dry run: {p.matched} {p.matched === 1 ? 'job' : 'jobs'} would be {verb(p.request.op)}</h2>
    <p class="muted">Nothing has changed yet. The first {p.sample.length} by id (the oldest); the set may grow or shrink before you confirm.</p>
    <JobTable jobs={p.sample} now={now} scrub={scrub} empty="No job matches." />
    {p.matched > 0 ? (
      <form method="post" action="/dashboard/bulk/apply" id="bulk-confirm" class="actions">
        <Carried request={p.request} seal={p.seal} csrf={csrf} />
        <button type="submit" class="danger">{p.request.op === 'retry' ? 'Retry' : 'Cancel'} these {p.matched}</button>
      </form>
    ) : null}
  </section>
);

const Outcome: FC<{ o: BulkOutcome; csrf: string }> = ({ o, csrf }) => {
  const c = o.counts;
  const rows: Array<[string, number]> = 'requeued' in c
    ? [['matched', c.matched], ['requeued', c.requeued], ['skipped', c.skipped]]
    : [['matched', c.matched], ['cancelled', c.cancelled], ['cancel requested (the hook runs at the next step)', c.cancelRequested], ['skipped', c.skipped]];
  return (
    <section class="panel" id="bulk-result">
      <h2>Done: {o.request.op === 'retry' ? 'retried' : 'cancelled'} in {c.batches} {c.batches === 1 ? 'batch' : 'batches'}</h2>
      <table><tbody>{rows.map(([label, n]) => <tr data-count={label.split(' ')[0]}><th>{label}</th><td>{n}</td></tr>)}</tbody></table>
      <p class="muted">Skipped jobs had moved on before their turn (or another job holds their dedupe key); they are left as they are.</p>
      {c.nextCursor ? (
        <form method="post" action="/dashboard/bulk/apply" id="bulk-continue" class="actions">
          <Carried request={o.request} seal={o.seal} csrf={csrf} />
          <input type="hidden" name="cursor" value={c.nextCursor} />
          <span>More jobs remain past this request's budget.</span> <button type="submit" class="danger">Go on</button>
        </form>
      ) : null}
    </section>
  );
};

/** Retry or cancel by filter: a dry run first (count and sample), then a confirm that applies what it counted. */
export const BulkPage: FC<BulkPageData> = (d) => (
  <Layout title="Bulk retry or cancel" header={<TopBar csrf={d.csrf} lease={d.lease} now={d.now} />}>
    {d.error ? <div class="error" role="alert">{d.error}</div> : null}
    <section class="panel" id="bulk">
      <h2>Retry or cancel in bulk</h2>
      <p class="muted">Each job is changed as its own retry or cancel would change it. A dry run counts what the filter takes and changes nothing.</p>
      <FilterForm csrf={d.csrf} shown={d.shown} types={d.types} />
    </section>
    {d.preview ? <Preview p={d.preview} csrf={d.csrf} now={d.now} scrub={d.scrub} /> : null}
    {d.outcome ? <Outcome o={d.outcome} csrf={d.csrf} /> : null}
  </Layout>
);
