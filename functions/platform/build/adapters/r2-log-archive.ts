import type { LogLine } from '../ports/build-service.ts';
import { archiveText, linesAfter, type ArchivedLog, type LogArchive } from '../ports/log-archive.ts';
import { currentUsage } from '../../../usage.ts';

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

export function archiveKey(buildId: string): string {
  return `builds/${buildId}.log`;
}

const LAST_SEQ = 'lastSeq';
const MAX_RACES = 5;

/**
 * One R2 object per build, rewritten whole on every append with the new lines added and the last
 * archived sequence number in its custom metadata.
 *
 * Why a rewrite: R2 has no append. The alternatives break the contract: one object per chunk is not
 * "one object per build", and a multipart upload is invisible until completed (and its parts must be
 * ≥ 5 MiB), so lines would not be archived as they arrive. A rewrite costs O(size) per poll; a build
 * log is a few MB at most and a poll adds a page of lines, so that stays cheap.
 *
 * Why conditional: the put is `onlyIf` the etag read (or, for the first write, only if no object
 * exists), so an owner whose lease was taken cannot overwrite a longer archive with a shorter one;
 * a lost race re-reads and merges. Appends are idempotent by sequence number, so a re-poll that
 * hands the same lines again changes nothing.
 */
export class R2LogArchive implements LogArchive {
  constructor(private readonly bucket: LogBucket) {}

  async read(buildId: string): Promise<ArchivedLog | null> {
    currentUsage()?.countSubrequest('r2');
    const object = await this.bucket.get(archiveKey(buildId));
    if (!object) return null;
    return { text: await object.text(), lastSeq: Number(object.customMetadata?.[LAST_SEQ] ?? 0) };
  }

  async append(buildId: string, lines: LogLine[]): Promise<ArchivedLog> {
    const key = archiveKey(buildId);
    for (let race = 0; race < MAX_RACES; race++) {
      currentUsage()?.countSubrequest('r2');
      const object = await this.bucket.get(key);
      const current: ArchivedLog = object
        ? { text: await object.text(), lastSeq: Number(object.customMetadata?.[LAST_SEQ] ?? 0) }
        : { text: '', lastSeq: 0 };
      const fresh = linesAfter(buildId, current.lastSeq, lines);
      if (fresh.length === 0) return current;
      const next: ArchivedLog = { text: current.text + archiveText(fresh), lastSeq: fresh.at(-1)?.seq ?? current.lastSeq };
      currentUsage()?.countSubrequest('r2');
      const written = await this.bucket.put(key, next.text, {
        customMetadata: { [LAST_SEQ]: String(next.lastSeq) },
        onlyIf: object ? { etagMatches: object.etag } : { etagDoesNotMatch: '*' },
        httpMetadata: { contentType: 'text/plain; charset=utf-8' },
      });
      if (written !== null) return next;
    }
    throw new Error(`log archive of build ${buildId}: lost ${MAX_RACES} write races in a row`);
  }
}
