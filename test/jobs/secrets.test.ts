import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import {
  decryptSecret,
  encryptSecret,
  fromBase64,
  generateEncryptionKey,
  parseKeyRing,
  resealSecret,
  Secret,
  SecretError,
  toBase64,
} from '../../functions/lib/secrets.ts';

const KEY_A = generateEncryptionKey();
const KEY_B = generateEncryptionKey();
const PLAINTEXT = 'postgresql://doadmin:s3cr3t-pässwörd@db.example.com:25061/app-pool?sslmode=require';

describe('secrets (AES-256-GCM, WebCrypto)', () => {
  it('seals to {kid, iv, ct} without the plaintext and opens to the same string', async () => {
    const ring = await parseKeyRing(`main:${KEY_A}`);
    const sealed = await encryptSecret(PLAINTEXT, ring);
    expect(Object.keys(sealed).sort()).toEqual(['ct', 'iv', 'kid']);
    expect(sealed.kid).toBe('main');
    expect(fromBase64(sealed.iv)).toHaveLength(12);
    expect(JSON.stringify(sealed)).not.toContain('s3cr3t');
    expect(await decryptSecret(sealed, ring)).toBe(PLAINTEXT);
  });

  it('uses a fresh IV per value, so equal plaintexts give different ciphertexts', async () => {
    const ring = await parseKeyRing(KEY_A);
    const a = await encryptSecret(PLAINTEXT, ring);
    const b = await encryptSecret(PLAINTEXT, ring);
    expect(a.iv).not.toBe(b.iv);
    expect(a.ct).not.toBe(b.ct);
  });

  it('derives a stable key id for a bare key', async () => {
    const one = await parseKeyRing(KEY_A);
    const two = await parseKeyRing(` ${KEY_A} `);
    expect(one.activeKid).toMatch(/^k[0-9a-f]{8}$/);
    expect(two.activeKid).toBe(one.activeKid);
    expect((await parseKeyRing(KEY_B)).activeKid).not.toBe(one.activeKid);
  });

  it('rotates: the first key seals, older keys still open, and reseal moves a value to the active key', async () => {
    const old = await parseKeyRing(`k2025:${KEY_A}`);
    const sealedOld = await encryptSecret(PLAINTEXT, old, { context: 'ctx' });
    const rotated = await parseKeyRing(`k2026:${KEY_B},k2025:${KEY_A}`);
    expect(rotated.activeKid).toBe('k2026');
    expect(await decryptSecret(sealedOld, rotated, { context: 'ctx' })).toBe(PLAINTEXT);
    const resealed = await resealSecret(sealedOld, rotated, { context: 'ctx' });
    expect(resealed.kid).toBe('k2026');
    expect(await decryptSecret(resealed, await parseKeyRing(`k2026:${KEY_B}`), { context: 'ctx' })).toBe(PLAINTEXT);
    expect(await resealSecret(resealed, rotated, { context: 'ctx' })).toBe(resealed);
  });

  it('refuses a value under a key the ring no longer has, naming only the key id', async () => {
    const sealed = await encryptSecret(PLAINTEXT, await parseKeyRing(`gone:${KEY_A}`));
    const error = await decryptSecret(sealed, await parseKeyRing(`other:${KEY_B}`)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SecretError);
    expect((error as Error).message).toMatch(/no key with id gone/);
  });

  it('refuses a wrong key under the same id, a tampered ciphertext and a different context, without leaking', async () => {
    const ring = await parseKeyRing(`k:${KEY_A}`);
    const sealed = await encryptSecret(PLAINTEXT, ring, { context: 'service:a:database:db' });
    const ct = fromBase64(sealed.ct);
    ct[0]! ^= 1;
    const otherKey = await parseKeyRing(`k:${KEY_B}`);
    const attempts = [
      () => decryptSecret(sealed, otherKey, { context: 'service:a:database:db' }),
      () => decryptSecret({ ...sealed, ct: toBase64(ct) }, ring, { context: 'service:a:database:db' }),
      () => decryptSecret(sealed, ring, { context: 'service:b:database:db' }),
      () => decryptSecret(sealed, ring),
    ];
    for (const attempt of attempts) {
      const error = await attempt().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(SecretError);
      expect((error as Error).message).not.toContain('s3cr3t');
    }
  });

  it('rejects bad key material with a message that does not echo it', async () => {
    await expect(parseKeyRing('')).rejects.toThrow(/no encryption key/);
    await expect(parseKeyRing('short:AAAA')).rejects.toThrow(/32 bytes/);
    await expect(parseKeyRing(`a:${KEY_A},a:${KEY_B}`)).rejects.toThrow(/appears twice/);
    await expect(parseKeyRing(`bad id:${KEY_A}`)).rejects.toThrow(/key id/);
    const error = (await parseKeyRing('k:!!!notbase64!!!').catch((e: unknown) => e)) as Error;
    expect(error.message).not.toContain('notbase64');
  });

  it('keeps a Secret out of JSON, string conversion and inspect', () => {
    const secret = new Secret(PLAINTEXT);
    expect(JSON.stringify({ uri: secret })).toBe('{"uri":"[redacted]"}');
    expect(`${secret}`).toBe('[redacted]');
    expect(inspect({ secret })).not.toContain('s3cr3t');
    expect(secret.reveal()).toBe(PLAINTEXT);
  });
});
