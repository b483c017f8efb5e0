import { decodeCursor, isJobId, JOB_STATUSES, type JobStatus, type ListJobsOptions } from '../../queue/index.ts';
import { HttpError } from '../http/errors.ts';

/**
 * The jobs page's query string, read into a listing: every value is checked here and reaches
 * Postgres only as a bound parameter (queue/driver/jobs.ts jobPage), never as SQL text.
 *
 * The search box `q` reads as:
 * - a job id: that job (the primary key)
 * - `key:<text>`, or text with no `=`: jobs holding it as submit key or dedupe key (each an index)
 * - `<field>=<value>`, field a payload path (`account_id`, `spec.region`): jobs whose payload there
 *   is the value as text. No index serves it: it scans the jobs created in the last
 *   PAYLOAD_SCAN_DAYS days (a range of the primary key) newest first, stopping at a page.
 */
export const PAGE_SIZE = 25;
export const PAYLOAD_SCAN_DAYS = 7;
export const Q_MAX = 200;
const PAYLOAD_PATH = /^[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62}){0,4}$/;
const TYPE = /^[a-z][a-z0-9_]{0,62}$/;

export type SearchKind = 'id' | 'key' | 'payload';

export interface JobSearch {
  /** The filters as given, to render the form and the next page's link. */
  shown: { q: string; status?: JobStatus; type?: string; inProgress?: boolean };
  kind?: SearchKind;
  /** The job id searched for (kind 'id'). */
  id?: string;
  /** The listing (absent for kind 'id'). */
  list: ListJobsOptions;
}

export function readSearch(query: Record<string, string | undefined>): JobSearch {
  const q = (query.q ?? '').trim();
  if (q.length > Q_MAX) throw new HttpError(400, 'invalid_input', `q is longer than ${Q_MAX} characters`, 'q');
  const status = JOB_STATUSES.includes(query.status as JobStatus) ? (query.status as JobStatus) : undefined;
  const type = query.type && TYPE.test(query.type) ? query.type : undefined;
  const inProgress = query.inProgress === 'true' ? true : undefined;
  if (query.cursor !== undefined && !decodeCursor(query.cursor)) {
    throw new HttpError(400, 'invalid_input', 'cursor is not a cursor this dashboard made', 'cursor');
  }
  const list: ListJobsOptions = { status, type, inProgress, limit: PAGE_SIZE, cursor: query.cursor };
  const shown = { q, status, type, inProgress };
  if (q === '') return { shown, list };
  if (isJobId(q)) return { shown, kind: 'id', id: q.toLowerCase(), list };
  if (q.startsWith('key:')) return { shown, kind: 'key', list: { ...list, key: q.slice(4) } };
  const eq = q.indexOf('=');
  const path = eq > 0 ? q.slice(0, eq).trim() : '';
  if (eq > 0 && PAYLOAD_PATH.test(path)) {
    return {
      shown, kind: 'payload',
      list: { ...list, payload: { path: path.split('.'), value: q.slice(eq + 1).trim() }, createdWithinMs: PAYLOAD_SCAN_DAYS * 86_400_000 },
    };
  }
  return { shown, kind: 'key', list: { ...list, key: q } };
}

/** The query string of a listing page: the filters, and the cursor when there is one. */
export function searchHref(shown: JobSearch['shown'], cursor?: string): string {
  const params = new URLSearchParams();
  if (shown.q) params.set('q', shown.q);
  if (shown.status) params.set('status', shown.status);
  if (shown.type) params.set('type', shown.type);
  if (shown.inProgress) params.set('inProgress', 'true');
  if (cursor) params.set('cursor', cursor);
  const s = params.toString();
  return s ? `/dashboard/jobs?${s}` : '/dashboard/jobs';
}
