import { isSecretName } from './worker-secrets.ts';

/**
 * Secrets never appear in API answers, events shown to users, logs or the dashboard. Values
 * under keys that name a secret are replaced wherever they are nested: keys named like a secret
 * (the pattern), and the Worker's own secret names however they are cased (`encryptionKeys`,
 * `ALERT_WEBHOOK_URL`: lib/worker-secrets.ts), which the pattern alone does not all match.
 */
const SECRET_PATTERN = /(secret|password|passwd|token|api[-_]?key|private[-_]?key|connection[-_]?string|credential|authorization|dsn|encryption[-_]?keys?|key[-_]?ring)/i;
const isSecretKey = (key: string) => SECRET_PATTERN.test(key) || isSecretName(key);
export const REDACTED = '[redacted]';
export const TOO_DEEP = '[nested too deep]';
const MAX_DEPTH = 32;

/**
 * A copy with secret-named values replaced. A subtree nested deeper than 32 levels is elided, not
 * passed through: a secret hidden below the limit is never shown, and the copy stays shallow
 * enough to serialize (a payload enqueued from SQL may nest thousands of levels).
 */
export function redactSecrets<T>(value: T, depth = 0): T {
  if (value === null || typeof value !== 'object') return value;
  if (depth > MAX_DEPTH) return TOO_DEEP as T;
  if (Array.isArray(value)) return value.map((v) => redactSecrets(v, depth + 1)) as T;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    out[k] = isSecretKey(k) && v !== null && v !== undefined ? REDACTED : redactSecrets(v, depth + 1);
  }
  return out as T;
}

/**
 * Removes known secret values from free text (e.g. an error message that echoed a token). Used on
 * what the system produced (step errors, provider answers, log lines, alerts) before it is
 * written anywhere — never on what a caller sent: a payload is shown back as sent, so that a
 * payload holding a guessed secret reads the same whether the guess is right or wrong.
 */
export function scrubText(text: string, secrets: Array<string | undefined>): string {
  let out = text;
  for (const s of secrets) if (s && s.length >= 6) out = out.split(s).join(REDACTED);
  return out;
}

/**
 * A copy of a JSON value (a step's checkpoint or result: provider answers land there) with
 * `scrub` applied to every string and every object key. Unlike redactSecrets it keeps the shape
 * and every other value: this is what gets stored.
 */
export function scrubJson<T>(value: T, scrub: (text: string) => string): T {
  if (typeof value === 'string') return scrub(value) as T;
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map((v) => scrubJson(v, scrub)) as T;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) out[scrub(k)] = scrubJson(v, scrub);
  return out as T;
}
