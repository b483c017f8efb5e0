import { HttpError } from '../http/errors.ts';

/**
 * Reading the dashboard's form posts: each field is checked here and refused with a 400 naming
 * it, before anything is written. Values reach the engine as arguments, never as SQL text.
 */
export type FormBody = Record<string, string | File | (string | File)[]>;

function invalid(field: string, message: string): HttpError {
  return new HttpError(400, 'invalid_input', `${field}: ${message}`, field);
}

/** A text field, trimmed; undefined when absent or blank. A file or a repeated field is refused. */
export function textField(form: FormBody, name: string, options: { max: number; required?: boolean }): string | undefined {
  const raw = form[name];
  if (raw !== undefined && typeof raw !== 'string') throw invalid(name, 'must be text');
  const value = (raw ?? '').trim();
  if (value === '') {
    if (options.required) throw invalid(name, 'is required');
    return undefined;
  }
  if (value.length > options.max) throw invalid(name, `is longer than ${options.max} characters`);
  return value;
}

/** One of `choices`; undefined when absent or blank. */
export function choiceField<T extends string>(form: FormBody, name: string, choices: readonly T[], options: { required?: boolean } = {}): T | undefined {
  const value = textField(form, name, { max: 100, required: options.required });
  if (value === undefined) return undefined;
  if (!(choices as readonly string[]).includes(value)) throw invalid(name, `must be one of ${choices.join(', ')}`);
  return value as T;
}

/**
 * JSON typed into a textarea; undefined when blank. The parser's own message is not shown: it
 * quotes the text around the mistake, which may be a secret the operator pasted.
 */
export function jsonField(form: FormBody, name: string, options: { max: number; object?: boolean }): unknown {
  const text = textField(form, name, { max: options.max });
  if (text === undefined) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw invalid(name, 'is not valid JSON');
  }
  if (options.object && (value === null || typeof value !== 'object' || Array.isArray(value))) throw invalid(name, 'must be a JSON object ({…})');
  return value;
}

const LOCAL_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d{1,3})?)?$/;
const ZONED_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d{1,9})?)?(Z|[+-]\d\d:\d\d)$/;

/** A time: a datetime-local input's value (read as UTC, as the dashboard shows times) or ISO 8601 with a zone. ISO text, or undefined. */
export function timeField(form: FormBody, name: string): string | undefined {
  const text = textField(form, name, { max: 40 });
  if (text === undefined) return undefined;
  const iso = LOCAL_TIME.test(text) ? `${text}Z` : ZONED_TIME.test(text) ? text : null;
  const at = iso === null ? NaN : Date.parse(iso);
  if (Number.isNaN(at)) throw invalid(name, 'must be a time (UTC, e.g. 2026-05-01T00:00)');
  return new Date(at).toISOString();
}
