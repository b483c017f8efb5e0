import type { ArchivedLog } from '../ports/log-archive.ts';
import { ConditionalLogArchive, type LogObjectStore, type StoredLog } from './conditional-log-archive.ts';
import { currentUsage } from '../../../usage.ts';

export { archiveKey } from './conditional-log-archive.ts';

/**
 * The slice of an R2 bucket binding this archive uses, declared structurally so this file compiles
 * without Cloudflare types; the Worker passes `env.<BUCKET>` as is. `put` answers null when an
 * `onlyIf` condition fails (R2's conditional put).
 */
export interface LogBucket {
  get(key: string): Promise<{ text(): Promise<string>; etag: string; customMetadata?: Record<string, string> } | null>;
  put(
    key: string,
    body: string,
    options: { customMetadata: Record<string, string>; onlyIf?: { etagMatches?: string; etagDoesNotMatch?: string }; httpMetadata?: { contentType?: string } },
  ): Promise<unknown | null>;
}

const LAST_SEQ = 'lastSeq';

/** The archive's object calls over an R2 binding: R2's conditional put (`onlyIf`), which R2 documents and enforces. */
export class R2LogObjects implements LogObjectStore {
  constructor(private readonly bucket: LogBucket) {}

  async get(key: string): Promise<StoredLog | null> {
    currentUsage()?.countSubrequest('r2');
    const object = await this.bucket.get(key);
    if (!object) return null;
    return { text: await object.text(), lastSeq: Number(object.customMetadata?.[LAST_SEQ] ?? 0), etag: object.etag };
  }

  async putIf(key: string, log: ArchivedLog, etag: string | null): Promise<boolean> {
    currentUsage()?.countSubrequest('r2');
    const written = await this.bucket.put(key, log.text, {
      customMetadata: { [LAST_SEQ]: String(log.lastSeq) },
      onlyIf: etag !== null ? { etagMatches: etag } : { etagDoesNotMatch: '*' },
      httpMetadata: { contentType: 'text/plain; charset=utf-8' },
    });
    return written !== null;
  }
}

/** One R2 object per build (see ConditionalLogArchive). */
export class R2LogArchive extends ConditionalLogArchive {
  constructor(bucket: LogBucket) {
    super(new R2LogObjects(bucket));
  }
}
