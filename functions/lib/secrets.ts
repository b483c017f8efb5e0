/**
 * Secrets at rest: AES-256-GCM with WebCrypto (the same code runs in Node and in workerd).
 *
 * A sealed value is `{kid, iv, ct}` (base64): the key id travels beside the ciphertext, so keys
 * can rotate. Encryption always uses the ring's active key; decryption picks the key the value
 * names, so values sealed under an older key still open until they are re-sealed.
 *
 * A key ring comes from one secret, e.g. `ENCRYPTION_KEYS="k2026:<base64>,k2025:<base64>"` (the
 * first entry is active). A bare `<base64>` entry gets a kid derived from the key itself. Each key
 * is 32 random bytes, base64-encoded (`generateEncryptionKey()` or `openssl rand -base64 32`).
 *
 * `context` is bound into the ciphertext as AES-GCM additional data: a value sealed for one place
 * (say, one service's database) does not open anywhere else, so ciphertexts cannot be swapped.
 */

export interface SealedSecret {
  kid: string;
  iv: string;
  ct: string;
}

export interface KeyRing {
  /** The kid new values are sealed with. */
  activeKid: string;
  keys: ReadonlyMap<string, CryptoKey>;
}

/** Any failure to parse a key or open a value. The message never contains key or plaintext material. */
export class SecretError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SecretError';
  }
}

const KEY_BYTES = 32;
const IV_BYTES = 12;
const KID_PATTERN = /^[A-Za-z0-9_.-]{1,64}$/;

export function toBase64(bytes: Uint8Array): string {
  let binary = '';
  for (let i = 0; i < bytes.length; i++) binary += String.fromCharCode(bytes[i]!);
  return btoa(binary);
}

export function fromBase64(text: string): Uint8Array {
  let binary: string;
  try {
    binary = atob(text.trim());
  } catch {
    throw new SecretError('not valid base64');
  }
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

/** A new random key, base64: what an operator stores as the secret. */
export function generateEncryptionKey(): string {
  return toBase64(crypto.getRandomValues(new Uint8Array(KEY_BYTES)));
}

async function importKey(base64: string): Promise<{ key: CryptoKey; raw: Uint8Array }> {
  const raw = fromBase64(base64);
  if (raw.length !== KEY_BYTES) throw new SecretError(`an encryption key must be ${KEY_BYTES} bytes (base64), got ${raw.length}`);
  const key = await crypto.subtle.importKey('raw', raw as BufferSource, { name: 'AES-GCM' }, false, ['encrypt', 'decrypt']);
  return { key, raw };
}

async function derivedKid(raw: Uint8Array): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', raw as BufferSource));
  return `k${[...digest.slice(0, 4)].map((b) => b.toString(16).padStart(2, '0')).join('')}`;
}

/** A ring from `kid:base64` entries (or bare base64), comma- or newline-separated; the first is active. */
export async function parseKeyRing(spec: string | undefined): Promise<KeyRing> {
  const entries = (spec ?? '').split(/[,\n]/).map((e) => e.trim()).filter(Boolean);
  if (entries.length === 0) throw new SecretError('no encryption key configured (ENCRYPTION_KEYS is empty)');
  const keys = new Map<string, CryptoKey>();
  let activeKid: string | undefined;
  for (const [i, entry] of entries.entries()) {
    const colon = entry.indexOf(':');
    const { key, raw } = await importKey(colon >= 0 ? entry.slice(colon + 1) : entry).catch((error: unknown) => {
      throw new SecretError(`encryption key #${i + 1}: ${(error as Error).message}`);
    });
    const kid = colon >= 0 ? entry.slice(0, colon) : await derivedKid(raw);
    if (!KID_PATTERN.test(kid)) throw new SecretError(`encryption key #${i + 1}: key id must match ${KID_PATTERN}`);
    if (keys.has(kid)) throw new SecretError(`encryption key id ${kid} appears twice`);
    keys.set(kid, key);
    activeKid ??= kid;
  }
  return { activeKid: activeKid!, keys };
}

function additionalData(context: string | undefined): { additionalData?: BufferSource } {
  return context === undefined ? {} : { additionalData: new TextEncoder().encode(context) as BufferSource };
}

export interface SealOptions {
  /** Where the value lives (bound into the ciphertext); opening needs the same context. */
  context?: string;
}

export async function encryptSecret(plaintext: string, ring: KeyRing, options: SealOptions = {}): Promise<SealedSecret> {
  const key = ring.keys.get(ring.activeKid);
  if (!key) throw new SecretError(`the active key ${ring.activeKid} is not in the ring`);
  // A fresh random 96-bit IV per value: GCM's security depends on never reusing one under a key.
  const iv = crypto.getRandomValues(new Uint8Array(IV_BYTES));
  const ct = await crypto.subtle.encrypt({ name: 'AES-GCM', iv: iv as BufferSource, ...additionalData(options.context) }, key, new TextEncoder().encode(plaintext) as BufferSource);
  return { kid: ring.activeKid, iv: toBase64(iv), ct: toBase64(new Uint8Array(ct)) };
}

export async function decryptSecret(sealed: SealedSecret, ring: KeyRing, options: SealOptions = {}): Promise<string> {
  if (!isSealedSecret(sealed)) throw new SecretError('not a sealed value ({kid, iv, ct})');
  const key = ring.keys.get(sealed.kid);
  if (!key) throw new SecretError(`no key with id ${sealed.kid} in the ring (was it rotated out?)`);
  const iv = fromBase64(sealed.iv);
  if (iv.length !== IV_BYTES) throw new SecretError('the iv must be 12 bytes');
  try {
    const plain = await crypto.subtle.decrypt({ name: 'AES-GCM', iv: iv as BufferSource, ...additionalData(options.context) }, key, fromBase64(sealed.ct) as BufferSource);
    return new TextDecoder().decode(plain);
  } catch {
    throw new SecretError(`the value sealed with key ${sealed.kid} does not open: wrong key, wrong context, or tampered`);
  }
}

/** Re-seal a value under the ring's active key (rotation); a value already under it is returned as is. */
export async function resealSecret(sealed: SealedSecret, ring: KeyRing, options: SealOptions = {}): Promise<SealedSecret> {
  if (sealed.kid === ring.activeKid) return sealed;
  return encryptSecret(await decryptSecret(sealed, ring, options), ring, options);
}

export function isSealedSecret(value: unknown): value is SealedSecret {
  const v = value as Partial<SealedSecret> | null;
  return typeof v === 'object' && v !== null && typeof v.kid === 'string' && typeof v.iv === 'string' && typeof v.ct === 'string';
}

/**
 * A plaintext secret in memory that refuses to be serialized or printed by accident: JSON,
 * string conversion and Node's inspect all show `[redacted]`. Only `reveal()` gives the value.
 */
export class Secret {
  readonly #value: string;
  constructor(value: string) {
    this.#value = value;
  }
  reveal(): string {
    return this.#value;
  }
  toJSON(): string {
    return '[redacted]';
  }
  toString(): string {
    return '[redacted]';
  }
  [Symbol.for('nodejs.util.inspect.custom')](): string {
    return 'Secret([redacted])';
  }
}
