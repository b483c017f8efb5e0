import { AwsClient } from 'aws4fetch';
import { beforeAll, describe, expect, it } from 'vitest';
import { SpacesClient, SpacesError } from '../../functions/adapters/spaces-client.ts';
import { archiveKey } from '../../functions/platform/build/adapters/conditional-log-archive.ts';
import { R2LogObjects } from '../../functions/platform/build/adapters/r2-log-archive.ts';
import { PROBE_KEY, SpacesLogArchive, SpacesLogObjects } from '../../functions/platform/build/adapters/spaces-log-archive.ts';
import { PermanentError } from '../../queue/errors.ts';
import type { SandboxHandle } from '../../sandbox/server.ts';
import { MemoryBucket, memoryLogArchive } from '../support/build-fakes.ts';
import { logArchiveCases } from '../support/log-archive-cases.ts';
import { createTestSandbox } from '../support/sandbox.ts';
import { ignoreConditions, sandboxSpaces, spacesObjects } from '../support/spaces.ts';

/**
 * The build-log archive's promises, one suite run against each store: R2 (the production adapter
 * over an in-memory bucket with R2's conditional put) and Spaces (the production adapter over
 * real HTTP to the sandbox, which verifies each request's SigV4 signature and enforces
 * If-None-Match / If-Match).
 */

let sandbox: SandboxHandle;
beforeAll(async () => {
  sandbox = await createTestSandbox();
});

const line = (seq: number) => ({ seq, text: `line ${seq}` });
const onlyLogs = (objects: { key: string; body: string }[]) => new Map(objects.filter((o) => o.key.startsWith('builds/')).map((o) => [o.key, o.body]));

logArchiveCases('R2', async () => {
  const bucket = new MemoryBucket();
  return { store: new R2LogObjects(bucket), objects: async () => new Map([...bucket.objects].map(([key, o]) => [key, o.body])) };
});

logArchiveCases('Spaces', async () => {
  const settings = sandboxSpaces(sandbox.url);
  return { store: new SpacesLogObjects(new SpacesClient(settings)), objects: async () => onlyLogs(await spacesObjects(sandbox.url, settings.bucket)) };
});

describe('R2 log archive', () => {
  it('keeps the last sequence number in the object’s custom metadata, under builds/<buildJobId>.log', async () => {
    const { archive, bucket } = memoryLogArchive();
    await archive.append('job-1', [line(1), line(2), line(3)]);
    expect(archiveKey('job-1')).toBe('builds/job-1.log');
    expect(bucket.objects.get('builds/job-1.log')!.customMetadata).toEqual({ lastSeq: '3' });
  });
});

describe('Spaces log archive', () => {
  const spacesCalls = (bucket: string) => sandbox.calls('spaces').filter((c) => c.path.startsWith(`/spaces/${bucket}/`));

  it('speaks S3: creates with If-None-Match: *, replaces with If-Match and the ETag it read, keeps lastseq in x-amz-meta', async () => {
    const settings = sandboxSpaces(sandbox.url);
    const archive = new SpacesLogArchive(new SpacesClient(settings));
    await archive.append('b-1', [line(1)]);
    await archive.append('b-1', [line(1), line(2)]);
    const [object] = (await spacesObjects(sandbox.url, settings.bucket)).filter((o) => o.key === 'builds/b-1.log');
    expect(object).toMatchObject({ body: 'line 1\nline 2\n', contentType: 'text/plain; charset=utf-8', metadata: { lastseq: '2' } });
    const logCalls = spacesCalls(settings.bucket).filter((c) => c.path.endsWith('/builds/b-1.log'));
    expect(logCalls.map((c) => `${c.method} ${c.headers['if-none-match'] ?? ''}${c.headers['if-match'] ? 'if-match' : ''}`)).toEqual(['GET ', 'PUT *', 'GET ', 'PUT if-match']);
    // the If-Match sent is the ETag of the version read, not of the one written
    expect(logCalls[3]!.headers['if-match']).toMatch(/^"[0-9a-f]{32}"$/);
    expect(logCalls[3]!.headers['if-match']).not.toBe(object!.etag);
    // the write check ran once for this bucket (before the first write), and not again
    expect(spacesCalls(settings.bucket).filter((c) => c.path.endsWith(PROBE_KEY)).length).toBe(2);
    await archive.append('b-2', [line(1)]);
    expect(spacesCalls(settings.bucket).filter((c) => c.path.endsWith(PROBE_KEY)).length).toBe(2);
  });

  it('refuses to write to a server that ignores the conditional headers, writing no log', async () => {
    const settings = sandboxSpaces(sandbox.url);
    await ignoreConditions(sandbox.url, settings.bucket, true);
    const archive = new SpacesLogArchive(new SpacesClient(settings));
    await expect(archive.append('b-1', [line(1)])).rejects.toSatisfy(
      (e) => e instanceof PermanentError && /ignored If-None-Match: \* on PutObject/.test((e as Error).message),
    );
    expect(onlyLogs(await spacesObjects(sandbox.url, settings.bucket)).size).toBe(0);
    // the same check on a server that enforces them passes, and the archive writes
    const honouring = sandboxSpaces(sandbox.url);
    expect(await new SpacesLogArchive(new SpacesClient(honouring)).append('b-1', [line(1)])).toEqual({ text: 'line 1\n', lastSeq: 1 });
  });

  it('a badly signed or unsigned request is refused with 403, naming S3’s code, and the secret is in no error', async () => {
    const settings = sandboxSpaces(sandbox.url);
    const wrongSecret = new SpacesClient({ ...settings, secretAccessKey: 'not-the-secret-0123456789abcdefghijklmn' });
    const refused = await wrongSecret.getObject('builds/x.log').catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(SpacesError);
    expect(refused).toMatchObject({ status: 403, code: 'SignatureDoesNotMatch' });
    expect(String((refused as Error).message)).not.toContain('not-the-secret');
    await expect(new SpacesClient({ ...settings, accessKeyId: 'DO00UNKNOWNKEY' }).putObject('builds/x.log', 'x', { contentType: 'text/plain', metadata: {} }))
      .rejects.toMatchObject({ status: 403, code: 'InvalidAccessKeyId' });
    const unsigned = await fetch(`${settings.endpoint}/${settings.bucket}/builds/x.log`, { method: 'PUT', body: 'x' });
    expect(unsigned.status).toBe(403);
    expect(await unsigned.text()).toContain('<Code>AccessDenied</Code>');
    // a signature made for one request does not carry to another (a different key, a different body)
    const aws = new AwsClient({ accessKeyId: settings.accessKeyId, secretAccessKey: settings.secretAccessKey, service: 's3', region: settings.region, retries: 0 });
    const signed = await aws.sign(`${settings.endpoint}/${settings.bucket}/builds/a.log`, { method: 'GET' });
    const moved = await fetch(`${settings.endpoint}/${settings.bucket}/builds/b.log`, { method: 'GET', headers: signed.headers });
    expect(moved.status).toBe(403);
    const hashed = await aws.sign(`${settings.endpoint}/${settings.bucket}/builds/a.log`, { method: 'PUT', body: 'line 1\n', headers: { 'x-amz-content-sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855' } });
    const tampered = await fetch(hashed.url, { method: 'PUT', headers: hashed.headers, body: 'line 1\n' });
    expect(tampered.status).toBe(400); // the body is not the one whose hash was signed
    expect(await tampered.text()).toContain('XAmzContentSHA256Mismatch');
    expect(onlyLogs(await spacesObjects(sandbox.url, settings.bucket)).size).toBe(0);
  });

  it('a Spaces outage is an error the step retries, not a lost write', async () => {
    const archive = new SpacesLogArchive(new SpacesClient({ ...sandboxSpaces(sandbox.url), endpoint: 'http://127.0.0.1:1/spaces' }));
    await expect(archive.append('b-1', [line(1)])).rejects.toSatisfy((e) => e instanceof SpacesError && !(e instanceof PermanentError) && /request failed/.test((e as Error).message));
  });
});
