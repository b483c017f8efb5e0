import type { FC } from 'hono/jsx';
import type { Job } from '../../queue/index.ts';
import { FilterFields, JobTable } from './job-table.tsx';
import { Layout } from './layout.tsx';
import { TopBar, type Lease } from './pages.tsx';
import { PAYLOAD_SCAN_DAYS, Q_MAX, searchHref, type JobSearch } from './search.ts';

export interface JobsPageData {
  now: Date;
  csrf: string;
  lease: Lease;
  search: JobSearch;
  types: string[];
  jobs: Job[];
  nextCursor: string | null;
  scrub: (text: string) => string;
}

/** What the search read the box as, so an operator knows what ran (and what was a scan). */
function searchNote(s: JobSearch): string | null {
  if (s.kind === 'key') return `Jobs whose submit key or dedupe key is ${JSON.stringify(s.list.key)}.`;
  if (s.kind === 'payload') {
    return `Jobs whose payload ${s.list.payload!.path.join('.')} is ${JSON.stringify(s.list.payload!.value)}, created in the last ${PAYLOAD_SCAN_DAYS} days (a scan: no index serves a payload field).`;
  }
  if (s.kind === 'id') return 'No job has this id.';
  return null;
}

/** The bulk page with this listing's type and status filled in (the search box is not a bulk filter). */
function bulkHref(s: JobSearch['shown']): string {
  const params = new URLSearchParams({ op: s.status === 'queued' || s.status === 'running' ? 'cancel' : 'retry' });
  if (s.type) params.set('type', s.type);
  if (s.status) params.set('status', s.status);
  return `/dashboard/bulk?${params}`;
}

/**
 * Every job, newest first, 25 a page, with search: keyset pages (the cursor is the last id
 * shown), so a page deep in millions of jobs costs what the first does.
 */
export const JobsPage: FC<JobsPageData> = (d) => {
  const s = d.search.shown;
  const filtered = Boolean(s.q || s.status || s.type || s.inProgress);
  const note = searchNote(d.search);
  return (
    <Layout title="Jobs" header={<TopBar csrf={d.csrf} lease={d.lease} now={d.now} />}>
      <section class="panel" id="jobs">
        <h2>Jobs</h2>
        <form method="get" action="/dashboard/jobs" class="actions" role="search">
          <FilterFields filter={s} types={d.types}>
            <input type="search" name="q" value={s.q} maxlength={Q_MAX} size={40} placeholder="job id, key, or payload field=value" aria-label="search" />
          </FilterFields>
          <button type="submit">Search</button>
          {filtered ? <a href="/dashboard/jobs">clear</a> : null}
        </form>
        {note ? <p class="muted" id="search-note">{note}</p> : null}
        <JobTable jobs={d.jobs} now={d.now} scrub={d.scrub} empty={filtered ? 'No jobs match.' : 'No jobs.'} />
        <p class="actions" id="pages">
          {d.search.list.cursor ? <a href={searchHref(s)} id="newest">« newest</a> : null}
          {d.nextCursor ? <a href={searchHref(s, d.nextCursor)} id="older" rel="next">older »</a> : null}
        </p>
        {s.type || s.status ? <p class="actions"><a href={bulkHref(s)} id="bulk-link">Retry or cancel the jobs of this type and status…</a> <span class="muted">(a dry run first)</span></p> : null}
      </section>
    </Layout>
  );
};
