import type { LogLine } from './build-service.ts';

/** A build's archived log: the lines' text, each followed by a newline, and the last line's number. */
export interface ArchivedLog {
  text: string;
  lastSeq: number;
}

/**
 * The durable copy of a build's log: exactly one object per build, written as lines arrive.
 * `buildId` is the build job's id (the id the logs route takes).
 */
export interface LogArchive {
  /**
   * Append lines in sequence order. Idempotent by sequence number: lines at or below the archive's
   * last sequence are already there and change nothing. A gap (the first new line is not
   * lastSeq + 1) is an error: the caller read from a cursor the archive never reached.
   */
  append(buildId: string, lines: LogLine[]): Promise<ArchivedLog>;
  /** The whole archive, or null when nothing was archived for the build. */
  read(buildId: string): Promise<ArchivedLog | null>;
}

/** Thrown by `append` for a gap in the sequence; retrying cannot close it, re-reading the log from the archive's end can. */
export class LogSequenceGapError extends Error {
  constructor(readonly buildId: string, readonly lastSeq: number, readonly nextSeq: number) {
    super(`log archive of build ${buildId} ends at line ${lastSeq}, but the next line given is ${nextSeq}`);
    this.name = 'LogSequenceGapError';
  }
}

/** The lines of `lines` that come after `lastSeq`, checked to continue it without a gap. */
export function linesAfter(buildId: string, lastSeq: number, lines: LogLine[]): LogLine[] {
  const fresh = lines.filter((l) => l.seq > lastSeq);
  fresh.forEach((line, i) => {
    if (line.seq !== lastSeq + 1 + i) throw new LogSequenceGapError(buildId, lastSeq + i, line.seq);
  });
  return fresh;
}

/** The archive text of some lines: each line's text and a newline. */
export function archiveText(lines: LogLine[]): string {
  return lines.map((l) => `${l.text}\n`).join('');
}
