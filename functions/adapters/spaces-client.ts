import { AwsClient } from 'aws4fetch';

/** Where a Spaces bucket is and the key pair that may write it (config.ts reads them from SPACES_*). */
export interface SpacesSettings {
  /** The region's endpoint, e.g. https://nyc3.digitaloceanspaces.com (the sandbox's /spaces under `npm start`). */
  endpoint: string;
  bucket: string;
  /** The region the requests are signed for, e.g. nyc3. */
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
}

export interface SpacesObject {
  body: string;
  /** As the server sent it, quotes included: If-Match takes it back as is. */
  etag: string;
  /** The object's x-amz-meta-* headers, by lowercase name without the prefix. */
  metadata: Record<string, string>;
}

export interface PutOptions {
  contentType: string;
  /** Sent as x-amz-meta-<name>; S3 stores metadata names lowercased, so give them lowercased. */
  metadata: Record<string, string>;
  /** Write only if the object's ETag is this one (If-Match). */
  ifMatch?: string;
  /** Write only if no object has the key (If-None-Match: *). */
  ifNoneMatch?: '*';
}

export type PutOutcome = { written: true; etag: string } | { written: false };

/** A Spaces answer the client did not expect; `code` is S3's error code from the XML body. */
export class SpacesError extends Error {
  constructor(readonly operation: string, readonly key: string, readonly status: number, readonly code: string | null, detail: string) {
    super(`Spaces ${operation} ${key}: ${status}${code ? ` ${code}` : ''}${detail ? `: ${detail}` : ''}`);
    this.name = 'SpacesError';
  }
}

const META_PREFIX = 'x-amz-meta-';

async function sha256Hex(body: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(body)));
  return [...digest].map((b) => b.toString(16).padStart(2, '0')).join('');
}

/** S3's XML error's code and message only: the rest (StringToSign, the canonical request, the key id) is not for logs. */
function s3Error(xml: string): { code: string | null; message: string } {
  const pick = (tag: string) => new RegExp(`<${tag}>([^<]*)</${tag}>`).exec(xml)?.[1] ?? null;
  return { code: pick('Code'), message: (pick('Message') ?? '').slice(0, 200) };
}

/**
 * The S3 calls the log archive and its purge make on one Spaces bucket, path-style
 * (`<endpoint>/<bucket>/<key>`), each a plain `fetch` signed with SigV4 by aws4fetch. The payload
 * is signed too (x-amz-content-sha256 is the body's hash, not UNSIGNED-PAYLOAD), so a body
 * changed in flight is refused. aws4fetch's own retries are off: a failed call fails the step,
 * and the engine's retry (with its backoff and attempt count) is the one retry.
 */
export class SpacesClient {
  private readonly aws: AwsClient;
  private readonly base: string;

  constructor(readonly settings: SpacesSettings) {
    this.aws = new AwsClient({ accessKeyId: settings.accessKeyId, secretAccessKey: settings.secretAccessKey, service: 's3', region: settings.region, retries: 0 });
    this.base = `${settings.endpoint.replace(/\/+$/, '')}/${encodeURIComponent(settings.bucket)}`;
  }

  /** The object, or null when the key has none (404). */
  async getObject(key: string): Promise<SpacesObject | null> {
    const res = await this.send('GetObject', key, { method: 'GET' });
    if (res.status === 404) {
      await res.body?.cancel();
      return null;
    }
    if (res.status !== 200) throw await this.failure('GetObject', key, res);
    const metadata: Record<string, string> = {};
    for (const [name, value] of res.headers) if (name.startsWith(META_PREFIX)) metadata[name.slice(META_PREFIX.length)] = value;
    return { body: await res.text(), etag: res.headers.get('etag') ?? '', metadata };
  }

  /**
   * PutObject. A failed precondition (412) is `{written: false}`, and so is S3's 409
   * ConditionalRequestConflict (two conditional writes of one key at once: S3 says retry).
   */
  async putObject(key: string, body: string, options: PutOptions): Promise<PutOutcome> {
    const headers: Record<string, string> = { 'content-type': options.contentType, 'x-amz-content-sha256': await sha256Hex(body) };
    for (const [name, value] of Object.entries(options.metadata)) headers[`${META_PREFIX}${name}`] = value;
    if (options.ifMatch !== undefined) headers['if-match'] = options.ifMatch;
    if (options.ifNoneMatch !== undefined) headers['if-none-match'] = options.ifNoneMatch;
    const res = await this.send('PutObject', key, { method: 'PUT', headers, body });
    if (res.status === 412 || res.status === 409) {
      await res.body?.cancel();
      return { written: false };
    }
    if (res.status !== 200) throw await this.failure('PutObject', key, res);
    await res.body?.cancel();
    return { written: true, etag: res.headers.get('etag') ?? '' };
  }

  /** DeleteObject; a key with no object is not an error (S3 answers 204 either way). */
  async deleteObject(key: string): Promise<void> {
    const res = await this.send('DeleteObject', key, { method: 'DELETE' });
    await res.body?.cancel();
    if (res.status !== 204 && res.status !== 200 && res.status !== 404) throw await this.failure('DeleteObject', key, res);
  }

  private async send(operation: string, key: string, init: { method: string; headers?: Record<string, string>; body?: string }): Promise<Response> {
    const url = `${this.base}/${key.split('/').map(encodeURIComponent).join('/')}`;
    const headers = init.headers ?? { 'x-amz-content-sha256': await sha256Hex('') };
    try {
      return await this.aws.fetch(url, { ...init, headers });
    } catch (error) {
      throw new SpacesError(operation, key, 0, null, `request failed: ${(error as Error).message}`);
    }
  }

  private async failure(operation: string, key: string, res: Response): Promise<SpacesError> {
    const { code, message } = s3Error(await res.text().catch(() => ''));
    return new SpacesError(operation, key, res.status, code, message);
  }
}
