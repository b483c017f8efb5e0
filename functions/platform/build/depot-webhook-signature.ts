/**
 * The signature of Depot's build-finished webhook. Depot documents no build webhook (its API
 * reference and the container-builds tutorial describe polling GetBuild only), so the scheme is
 * ours, chosen to be the one operators already know from Stripe:
 *
 *   Depot-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>
 *
 * The timestamp is signed with the body, so a captured delivery cannot be replayed outside the
 * tolerance; several `v1=` entries may be given (a secret being rotated), any one matching is
 * enough. Verified with WebCrypto's `verify`, which compares in constant time. Plain WebCrypto:
 * the Worker verifies and the sandbox signs with this one module.
 */

export const DEPOT_SIGNATURE_HEADER = 'depot-signature';
/** A delivery signed longer ago than this is refused (a replay); as Stripe's default. */
export const SIGNATURE_TOLERANCE_SECONDS = 300;
/** A delivery signed further ahead of our clock than this is refused (it would stay replayable until then). */
export const SIGNATURE_FUTURE_SKEW_SECONDS = 300;

const encoder = new TextEncoder();

function hmacKey(secret: string, usage: 'sign' | 'verify'): Promise<CryptoKey> {
  return crypto.subtle.importKey('raw', encoder.encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, [usage]);
}

function hex(bytes: ArrayBuffer): string {
  return [...new Uint8Array(bytes)].map((b) => b.toString(16).padStart(2, '0')).join('');
}

function fromHex(text: string): Uint8Array<ArrayBuffer> | null {
  if (!/^(?:[0-9a-f]{2})+$/i.test(text)) return null;
  const bytes = new Uint8Array(text.length / 2);
  for (let i = 0; i < bytes.length; i++) bytes[i] = parseInt(text.slice(2 * i, 2 * i + 2), 16);
  return bytes;
}

/** The header value for `rawBody` signed at `timestampSeconds`. */
export async function signDepotWebhook(rawBody: string, secret: string, timestampSeconds = Math.floor(Date.now() / 1000)): Promise<string> {
  const mac = await crypto.subtle.sign('HMAC', await hmacKey(secret, 'sign'), encoder.encode(`${timestampSeconds}.${rawBody}`));
  return `t=${timestampSeconds},v1=${hex(mac)}`;
}

/** null when the signature holds; otherwise why it does not (said to the sender, never the expected value). */
export async function depotSignatureProblem(
  rawBody: string,
  header: string | null | undefined,
  secret: string,
  now: Date = new Date(),
): Promise<string | null> {
  if (!header) return 'missing Depot-Signature header';
  const parts = header.split(',').map((p) => p.trim());
  const stamps = parts.filter((p) => p.startsWith('t=')).map((p) => p.slice(2));
  const signatures = parts.filter((p) => p.startsWith('v1=')).map((p) => fromHex(p.slice(3)));
  if (stamps.length !== 1 || !/^\d{1,12}$/.test(stamps[0]!)) return 'the Depot-Signature header needs exactly one t=<unix seconds>';
  if (signatures.length === 0) return 'the Depot-Signature header has no v1= signature';
  const timestamp = Number(stamps[0]);
  const age = Math.floor(now.getTime() / 1000) - timestamp;
  if (age > SIGNATURE_TOLERANCE_SECONDS) return `the signature's timestamp is ${age} s old (more than ${SIGNATURE_TOLERANCE_SECONDS} s: a replay?)`;
  if (-age > SIGNATURE_FUTURE_SKEW_SECONDS) return `the signature's timestamp is ${-age} s in the future (more than ${SIGNATURE_FUTURE_SKEW_SECONDS} s of clock skew)`;
  const key = await hmacKey(secret, 'verify');
  const signed = encoder.encode(`${stamps[0]}.${rawBody}`);
  for (const signature of signatures) {
    if (signature && (await crypto.subtle.verify('HMAC', key, signature, signed))) return null;
  }
  return 'no signature in the Depot-Signature header matches the body';
}
