/**
 * Every secret the Worker reads (`wrangler secret put NAME`), with what it is for. One list: the
 * env type (config.ts) declares these names, the scrubber removes their values from every log
 * line, alert, stored step error, API answer and dashboard page (invocation.ts envSecrets), and
 * test/worker/secrets.test.ts checks that wrangler.toml and the README's Deploying section list
 * exactly these, with one canary test per secret.
 */
export const WORKER_SECRETS = [
  { name: 'ADMIN_TOKEN', purpose: 'required: every API scope, and the dashboard login' },
  {
    name: 'SESSION_SECRET',
    purpose: 'required for the dashboard: signs its session cookies (at least 32 characters, `openssl rand -base64 32`; without it the dashboard refuses to log anyone in)',
  },
  { name: 'ENQUEUE_TOKEN', purpose: "optional narrower token for the control plane: enqueue the public job types, pushes, provisioning; reads every tenant's jobs and build logs" },
  { name: 'METRICS_TOKEN', purpose: 'optional narrower token: `GET /metrics`' },
  { name: 'ALERT_WEBHOOK_URL', purpose: 'optional: the Slack-compatible webhook alerts are posted to (without it, alerts are log lines)' },
  { name: 'DEPOT_TOKEN', purpose: 'Depot API token for builds (with the var `DEPOT_PROJECT_ID`)' },
  {
    name: 'DEPOT_WEBHOOK_SECRET',
    purpose: "optional: verifies the signature of Depot's build-finished webhooks (`POST /webhooks/depot`); without it builds finish by polling",
  },
  { name: 'DIGITALOCEAN_TOKEN', purpose: 'DigitalOcean API token (read + write) for provisioning and the cleanup inventory' },
  {
    name: 'ENCRYPTION_KEYS',
    purpose: 'the key ring sealing secrets at rest: `kid:<base64 32 bytes>[,older…]`, the first seals (`openssl rand -base64 32`)',
    keyRing: true,
  },
  { name: 'STRIPE_SECRET_KEY', purpose: 'Stripe API key for invoicing' },
  { name: 'STRIPE_WEBHOOK_SECRET', purpose: 'verifies the signature of Stripe webhook events' },
  { name: 'SPACES_ACCESS_KEY_ID', purpose: 'the Spaces access key build logs are archived with (`LOG_ARCHIVE = "spaces"`)' },
  { name: 'SPACES_SECRET_ACCESS_KEY', purpose: 'the secret of that Spaces access key: signs every request to the bucket' },
] as const satisfies ReadonlyArray<{ name: string; purpose: string; keyRing?: boolean }>;

export type SecretName = (typeof WORKER_SECRETS)[number]['name'];
export const SECRET_NAMES: readonly SecretName[] = WORKER_SECRETS.map((s) => s.name);

/** An env as far as its secrets go. */
export type SecretsEnv = { readonly [K in SecretName]?: unknown };

/** The declared secrets an env sets (non-empty strings), by name. */
export function readSecrets(env: SecretsEnv): Partial<Record<SecretName, string>> {
  const out: Partial<Record<SecretName, string>> = {};
  for (const { name } of WORKER_SECRETS) {
    const value = env[name];
    if (typeof value === 'string' && value !== '') out[name] = value;
  }
  return out;
}

/**
 * The values to scrub for the env's secrets: each whole value, and for the key ring each entry
 * and each key inside it (`kid:<base64>` entries, comma- or newline-separated, as
 * lib/secrets.ts parses them), since an error may quote one key rather than the whole ring.
 */
export function secretValues(env: SecretsEnv): string[] {
  const values: string[] = [];
  const set = readSecrets(env);
  for (const secret of WORKER_SECRETS) {
    const value = set[secret.name];
    if (value === undefined) continue;
    values.push(value);
    if ('keyRing' in secret && secret.keyRing) {
      for (const entry of value.split(/[,\n]/).map((e) => e.trim()).filter(Boolean)) {
        values.push(entry);
        const colon = entry.indexOf(':');
        if (colon >= 0) values.push(entry.slice(colon + 1).trim());
      }
    }
  }
  return values;
}

/** `ALERT_WEBHOOK_URL`, `alertWebhookUrl` and `alert-webhook-url` are one name. */
const normalized = (name: string) => name.replace(/[-_\s]/g, '').toLowerCase();
const NORMALIZED_NAMES = new Set(SECRET_NAMES.map(normalized));

/** True for an object key that names one of the declared secrets, however it is cased. */
export function isSecretName(key: string): boolean {
  return NORMALIZED_NAMES.has(normalized(key));
}
