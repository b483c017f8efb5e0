import { JOB_STATUSES, type BulkFilter } from '../../queue/index.ts';
import { HttpError } from '../http/errors.ts';
import { choiceField, textField, timeField, type FormBody } from './forms.ts';

/**
 * The bulk retry/cancel form (/dashboard/bulk): the operation and queue/bulk.ts's BulkFilter,
 * read from a post and checked field by field (400 naming the field). The dry run's confirm form
 * carries the request back as hidden fields, sealed to the session (session.ts sealFor), so a
 * confirm applies exactly the filter the dry run counted.
 */
export const BULK_OPS = ['retry', 'cancel'] as const;
export type BulkOp = (typeof BULK_OPS)[number];

export const TIME_FIELDS = ['createdAfter', 'createdBefore', 'finishedAfter', 'finishedBefore'] as const;

export interface BulkRequest {
  op: BulkOp;
  filter: BulkFilter;
  /** A cancel's reason (the jobs' last_error and event say it). */
  reason?: string;
}

const TYPE = /^[a-z][a-z0-9_]{0,62}$/;
const FINGERPRINT = /^[0-9a-f]{16}$/;

export function readBulkForm(form: FormBody): BulkRequest {
  const op = choiceField(form, 'op', BULK_OPS, { required: true })!;
  const type = textField(form, 'type', { max: 63 });
  if (type !== undefined && !TYPE.test(type)) throw new HttpError(400, 'invalid_input', 'type: is not a job type name', 'type');
  const fingerprint = textField(form, 'fingerprint', { max: 16 });
  if (fingerprint !== undefined && !FINGERPRINT.test(fingerprint)) {
    throw new HttpError(400, 'invalid_input', 'fingerprint: must be 16 hex digits, as the dead letters page shows', 'fingerprint');
  }
  // fixed key order: the seal is over this object's JSON
  const filter: BulkFilter = { type, status: choiceField(form, 'status', JOB_STATUSES), fingerprint };
  for (const field of TIME_FIELDS) filter[field] = timeField(form, field);
  const reason = op === 'cancel' ? textField(form, 'reason', { max: 1000 }) : undefined;
  return { op, filter, reason };
}

/** What the seal covers: the operation, the filter and the reason, as the confirm form carries them. */
export function sealText(request: BulkRequest): string {
  return JSON.stringify(['bulk', request.op, request.filter, request.reason ?? null]);
}

/** The request as form fields (the confirm form's hidden inputs, a dead-letter group's links). */
export function bulkFields(request: BulkRequest): Record<string, string> {
  const fields: Record<string, string> = { op: request.op };
  for (const [k, v] of Object.entries(request.filter)) if (typeof v === 'string') fields[k] = v;
  if (request.reason) fields.reason = request.reason;
  return fields;
}

/** The form's fields as a link's query asks for them, each cut short: a starting point the operator reads before a dry run. */
export function prefillFromQuery(query: Record<string, string>): Record<string, string> {
  const shown: Record<string, string> = {};
  for (const k of ['op', 'type', 'status', 'fingerprint', ...TIME_FIELDS]) if (query[k]) shown[k] = query[k]!.slice(0, 64);
  return shown;
}
