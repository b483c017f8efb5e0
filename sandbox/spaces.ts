import { createHash } from 'node:crypto';
import { AwsV4Signer } from 'aws4fetch';
import type { SandboxProvider, SandboxRequest, SandboxResponse } from './server.ts';
import { SANDBOX_SPACES_KEYS, SANDBOX_SPACES_PATH } from './spaces-keys.ts';

/**
 * DigitalOcean Spaces as the sandbox speaks it: the S3 object calls the log archive makes,
 * path-style under /spaces/<bucket>/<key> — PutObject (with If-None-Match: * and If-Match, 412 on
 * a failed precondition), GetObject (ETag and x-amz-meta-* headers) and DeleteObject. Buckets
 * exist when first used.
 *
 * Every request must carry a SigV4 Authorization header made with SANDBOX_SPACES_KEYS: the
 * sandbox recomputes the signature over the request it received with aws4fetch's signer and
 * answers 403 (InvalidAccessKeyId, SignatureDoesNotMatch, AccessDenied) as S3 does, and checks a
 * signed payload hash against the body (400 XAmzContentSHA256Mismatch).
 *
 * Control (under /_sandbox/spaces/):
 *   GET  objects[?bucket=]                 every object: bucket, key, body, etag, metadata
 *   POST ignore-conditions {bucket, ignore}  answer PutObject as if If-Match/If-None-Match were not sent
 */

interface StoredObject {
  body: string;
  etag: string;
  contentType: string;
  metadata: Record<string, string>;
  lastModified: Date;
}

const AUTHORIZATION = /^AWS4-HMAC-SHA256 Credential=([^/,\s]+)\/(\d{8})\/([^/,\s]+)\/s3\/aws4_request,\s*SignedHeaders=([a-z0-9;-]+),\s*Signature=([0-9a-f]{64})$/;
const META_PREFIX = 'x-amz-meta-';

function s3Error(status: number, code: string, message: string, resource = ''): SandboxResponse {
  const body = `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>${message}</Message><Resource>${resource}</Resource><RequestId>sandbox</RequestId></Error>`;
  return { status, headers: { 'content-type': 'application/xml' }, body };
}

const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');
const etagOf = (text: string) => `"${createHash('md5').update(text, 'utf8').digest('hex')}"`;

/** Null when the request is signed with the sandbox's key pair, else S3's refusal. */
async function refusal(req: SandboxRequest, resource: string): Promise<SandboxResponse | null> {
  const authorization = req.headers.authorization;
  if (!authorization) return s3Error(403, 'AccessDenied', 'the request is not signed', resource);
  const m = AUTHORIZATION.exec(authorization);
  if (!m) return s3Error(403, 'AccessDenied', 'the Authorization header is not AWS4-HMAC-SHA256 for s3', resource);
  const [, accessKeyId, day, region, signedHeaders, signature] = m as unknown as [string, string, string, string, string, string];
  if (accessKeyId !== SANDBOX_SPACES_KEYS.accessKeyId) return s3Error(403, 'InvalidAccessKeyId', 'no such access key', resource);
  const datetime = req.headers['x-amz-date'];
  if (!datetime || !datetime.startsWith(day)) return s3Error(403, 'SignatureDoesNotMatch', 'x-amz-date is missing or not of the credential’s day', resource);
  const payloadHash = req.headers['x-amz-content-sha256'];
  if (!payloadHash) return s3Error(400, 'InvalidRequest', 'x-amz-content-sha256 is required', resource);
  if (payloadHash !== 'UNSIGNED-PAYLOAD' && payloadHash !== sha256(req.body)) return s3Error(400, 'XAmzContentSHA256Mismatch', 'the body does not match its signed hash', resource);
  const names = signedHeaders.split(';');
  if (!names.includes('host')) return s3Error(403, 'SignatureDoesNotMatch', 'the host header must be signed', resource);
  const headers = Object.fromEntries(names.filter((n) => n !== 'host').map((n) => [n, req.headers[n] ?? '']));
  const search = req.query.size > 0 ? `?${req.query}` : '';
  const signer = new AwsV4Signer({
    method: req.method, url: `http://${req.headers.host}${req.path}${search}`, headers,
    accessKeyId, secretAccessKey: SANDBOX_SPACES_KEYS.secretAccessKey, service: 's3', region, datetime, allHeaders: true,
  });
  if (signer.signedHeaders !== signedHeaders || (await signer.signature()) !== signature) {
    return s3Error(403, 'SignatureDoesNotMatch', 'the request signature we calculated does not match the signature you provided', resource);
  }
  return null;
}

export function spacesSandbox(): SandboxProvider {
  const buckets = new Map<string, Map<string, StoredObject>>();
  const ignoring = new Set<string>();
  const bucket = (name: string) => {
    let objects = buckets.get(name);
    if (!objects) buckets.set(name, (objects = new Map()));
    return objects;
  };

  function put(req: SandboxRequest, name: string, key: string, resource: string): SandboxResponse {
    const objects = bucket(name);
    const current = objects.get(key);
    const ifMatch = req.headers['if-match'];
    const ifNoneMatch = req.headers['if-none-match'];
    if (!ignoring.has(name)) {
      if (ifNoneMatch !== undefined && ifNoneMatch !== '*') return s3Error(501, 'NotImplemented', 'If-None-Match takes only *', resource);
      if (ifNoneMatch === '*' && current) return s3Error(412, 'PreconditionFailed', 'an object with this key exists', resource);
      if (ifMatch !== undefined && !current) return s3Error(404, 'NoSuchKey', 'The specified key does not exist.', resource);
      if (ifMatch !== undefined && current!.etag !== ifMatch) return s3Error(412, 'PreconditionFailed', 'the object’s ETag is not the one given', resource);
    }
    const metadata: Record<string, string> = {};
    for (const [header, value] of Object.entries(req.headers)) if (header.startsWith(META_PREFIX)) metadata[header.slice(META_PREFIX.length)] = value;
    const object = { body: req.body, etag: etagOf(req.body), contentType: req.headers['content-type'] ?? 'binary/octet-stream', metadata, lastModified: new Date() };
    objects.set(key, object);
    return { status: 200, headers: { etag: object.etag }, body: '' };
  }

  return {
    name: 'spaces',
    async handle(req) {
      if (!req.path.startsWith(`${SANDBOX_SPACES_PATH}/`)) return undefined;
      const [name, ...rest] = req.path.slice(SANDBOX_SPACES_PATH.length + 1).split('/');
      const key = rest.map(decodeURIComponent).join('/');
      const resource = `/${name}/${key}`;
      const refused = await refusal(req, resource);
      if (refused) return refused;
      if (!name || !key) return s3Error(501, 'NotImplemented', `the sandbox speaks only object calls, not ${req.method} ${req.path}`, resource);
      const objects = bucket(name);
      switch (req.method) {
        case 'PUT':
          return put(req, name, key, resource);
        case 'GET': {
          const object = objects.get(key);
          if (!object) return s3Error(404, 'NoSuchKey', 'The specified key does not exist.', resource);
          const meta = Object.fromEntries(Object.entries(object.metadata).map(([k, v]) => [`${META_PREFIX}${k}`, v]));
          return { status: 200, headers: { 'content-type': object.contentType, etag: object.etag, 'last-modified': object.lastModified.toUTCString(), ...meta }, body: object.body };
        }
        case 'DELETE':
          objects.delete(key);
          return { status: 204 };
        default:
          return s3Error(405, 'MethodNotAllowed', `${req.method} is not an object call the sandbox speaks`, resource);
      }
    },
    control(path, req) {
      const input = (req.body ? JSON.parse(req.body) : {}) as Record<string, unknown>;
      if (path === '/objects' && req.method === 'GET') {
        const only = req.query.get('bucket');
        const objects = [...buckets].filter(([name]) => !only || name === only)
          .flatMap(([name, objs]) => [...objs].map(([key, o]) => ({ bucket: name, key, body: o.body, etag: o.etag, contentType: o.contentType, metadata: o.metadata })));
        return { status: 200, body: { objects } };
      }
      if (path === '/ignore-conditions' && req.method === 'POST') {
        if (typeof input.bucket !== 'string') return { status: 400, body: { error: 'bucket must be a string' } };
        if (input.ignore === true) ignoring.add(input.bucket);
        else ignoring.delete(input.bucket);
        return { status: 200, body: { ok: true } };
      }
      return { status: 404, body: { error: `no spaces control ${req.method} ${path}` } };
    },
    reset() {
      buckets.clear();
      ignoring.clear();
    },
  };
}
