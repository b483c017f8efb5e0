import type { SpacesSettings } from '../../functions/adapters/spaces-client.ts';
import { SANDBOX_SPACES_KEYS, SANDBOX_SPACES_PATH, SANDBOX_SPACES_REGION } from '../../sandbox/spaces-keys.ts';

/** Settings for a fresh bucket of the sandbox's Spaces (buckets exist when first used), in Node or workerd. */
export function sandboxSpaces(sandboxUrl: string, bucket = `logs-${crypto.randomUUID().slice(0, 8)}`): SpacesSettings {
  return { endpoint: `${sandboxUrl}${SANDBOX_SPACES_PATH}`, bucket, region: SANDBOX_SPACES_REGION, ...SANDBOX_SPACES_KEYS };
}

/** The env vars that point the Worker's log archive at a sandbox bucket. */
export function sandboxSpacesVars(settings: SpacesSettings): Record<string, string> {
  return {
    LOG_ARCHIVE: 'spaces',
    SPACES_ENDPOINT: settings.endpoint,
    SPACES_BUCKET: settings.bucket,
    SPACES_REGION: settings.region,
    SPACES_ACCESS_KEY_ID: settings.accessKeyId,
    SPACES_SECRET_ACCESS_KEY: settings.secretAccessKey,
  };
}

export interface SandboxSpacesObject {
  key: string;
  body: string;
  etag: string;
  contentType: string;
  metadata: Record<string, string>;
}

/** What the sandbox's bucket holds, read through its control endpoint (not the S3 API). */
export async function spacesObjects(sandboxUrl: string, bucket: string): Promise<SandboxSpacesObject[]> {
  const res = await fetch(`${sandboxUrl}/_sandbox/spaces/objects?bucket=${encodeURIComponent(bucket)}`);
  if (!res.ok) throw new Error(`sandbox spaces objects: ${res.status}`);
  return ((await res.json()) as { objects: SandboxSpacesObject[] }).objects;
}

/** Make the sandbox's bucket answer PutObject as a server that ignores If-Match / If-None-Match would. */
export async function ignoreConditions(sandboxUrl: string, bucket: string, ignore: boolean): Promise<void> {
  const res = await fetch(`${sandboxUrl}/_sandbox/spaces/ignore-conditions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ bucket, ignore }) });
  if (!res.ok) throw new Error(`sandbox spaces ignore-conditions: ${res.status}`);
}
