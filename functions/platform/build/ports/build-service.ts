/**
 * The build service the `build` job drives (Depot in production, the sandbox in tests and
 * `npm start`). Plain data in and out: no HTTP, Cloudflare or provider types.
 */

export interface BuildRequest {
  serviceId: string;
  branch: string;
  commitSha: string;
  /**
   * Deterministic per build job (see `buildRequestKey`): a re-run of the same job derives the same
   * key, so it can find a build it submitted before it crashed instead of starting a second one.
   */
  requestKey: string;
}

export type BuildStatus =
  | { state: 'running' }
  | { state: 'succeeded'; imageRef: string }
  | { state: 'failed'; error: string }
  | { state: 'cancelled' };

export interface LogLine {
  /** 1, 2, 3, … in the order of the build's log; the same line always has the same number. */
  seq: number;
  text: string;
  /** When the provider says the line was written (ISO 8601), if it says. */
  at?: string;
}

/**
 * Where a reader stopped in a build's log: opaque to callers, JSON-safe (it is stored in the job's
 * checkpoint), and `lastSeq` is the sequence number of the last line read before it.
 */
export interface LogCursor {
  lastSeq: number;
  /** Adapter-specific position; callers store it and hand it back unchanged. */
  position: string;
}

export interface LogPage {
  /** Lines after the cursor, numbered on from `cursor.lastSeq`; may be empty. */
  lines: LogLine[];
  /** Where the next read starts. */
  cursor: LogCursor;
  /** More lines can be read right now (the page was cut short); read again without waiting. */
  more: boolean;
}

export interface ReadLogsOptions {
  /**
   * The build has ended: nothing more will be written, so read every step to its end even if the
   * provider left it open (a failed or cancelled build can leave steps without an end time).
   */
  final?: boolean;
  signal?: AbortSignal;
}

export interface BuildService {
  /** Start a build; resolves once the provider has accepted it. */
  submit(request: BuildRequest, options?: { signal?: AbortSignal }): Promise<{ buildId: string }>;
  /** The build an earlier `submit` with this request key started, or null if there is none. */
  findByRequestKey(request: BuildRequest, options?: { signal?: AbortSignal }): Promise<{ buildId: string } | null>;
  status(buildId: string, options?: { signal?: AbortSignal }): Promise<BuildStatus>;
  /** Log lines after `cursor` (null: from the start). Re-reading from a cursor yields the same lines with the same numbers. */
  readLogs(buildId: string, cursor: LogCursor | null, options?: ReadLogsOptions): Promise<LogPage>;
  /** Stop the build at the provider. Cancelling a build that already ended is not an error. */
  cancel(buildId: string, reason: string, options?: { signal?: AbortSignal }): Promise<void>;
}

/** The request key of the build a job submits: derived from the job id alone, so every re-run agrees. */
export function buildRequestKey(jobId: string): string {
  return `starbase-build-${jobId}`;
}
