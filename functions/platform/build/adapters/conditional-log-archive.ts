import type { LogLine } from '../ports/build-service.ts';
import { archiveText, linesAfter, type ArchivedLog, type LogArchive } from '../ports/log-archive.ts';

/** A build's archive object as a store holds it: its text, its last line's number and its version (ETag). */
export interface StoredLog extends ArchivedLog {
  etag: string;
}

/**
 * The two calls an object store must offer for a log archive: a read that says which version it
 * read, and a write that happens only if the object is still that version (or, for `etag` null,
 * only if there is no object yet). R2 and Spaces each implement it over their own API.
 */
export interface LogObjectStore {
  get(key: string): Promise<StoredLog | null>;
  /** False when the condition failed: another writer changed the object since it was read. */
  putIf(key: string, log: ArchivedLog, etag: string | null): Promise<boolean>;
}

export function archiveKey(buildId: string): string {
  return `builds/${buildId}.log`;
}

const MAX_RACES = 5;

/**
 * One object per build, rewritten whole on every append with the new lines added and the last
 * archived sequence number beside it (the store's object metadata).
 *
 * Why a rewrite: neither R2 nor Spaces has an append. The alternatives break the contract: one
 * object per chunk is not "one object per build", and a multipart upload is invisible until
 * completed (and its parts must be ≥ 5 MiB), so lines would not be archived as they arrive. A
 * rewrite costs O(size) per poll; a build log is a few MB at most and a poll adds a page of
 * lines, so that stays cheap.
 *
 * Why conditional: the write is conditional on the version read (or, for the first write, on no
 * object existing), so an owner whose lease was taken cannot overwrite a longer archive with a
 * shorter one; a lost race re-reads and merges. Appends are idempotent by sequence number, so a
 * re-poll that hands the same lines again changes nothing.
 */
export class ConditionalLogArchive implements LogArchive {
  constructor(private readonly store: LogObjectStore) {}

  async read(buildId: string): Promise<ArchivedLog | null> {
    const stored = await this.store.get(archiveKey(buildId));
    return stored ? { text: stored.text, lastSeq: stored.lastSeq } : null;
  }

  async append(buildId: string, lines: LogLine[]): Promise<ArchivedLog> {
    const key = archiveKey(buildId);
    for (let race = 0; race < MAX_RACES; race++) {
      const stored = await this.store.get(key);
      const current: ArchivedLog = stored ? { text: stored.text, lastSeq: stored.lastSeq } : { text: '', lastSeq: 0 };
      const fresh = linesAfter(buildId, current.lastSeq, lines);
      if (fresh.length === 0) return current;
      const next: ArchivedLog = { text: current.text + archiveText(fresh), lastSeq: fresh.at(-1)?.seq ?? current.lastSeq };
      if (await this.store.putIf(key, next, stored?.etag ?? null)) return next;
    }
    throw new Error(`log archive of build ${buildId}: lost ${MAX_RACES} write races in a row`);
  }
}
